// The plugin loader's checks that need no plugin: names, file names, the directory, the file.

#include <catch2/catch.hpp>

#include <string>

#include "plugin_test_support.hpp"
#include "xtel/exporters/plugin.hpp"

namespace plugin_name_test {

using Catch::Matchers::Contains;
using xtel::test::exporter_error_of;
using xtel::test::temp_dir;
using xtel::test::write_file;

TEST_CASE("a plugin name of letters, digits, '_' and '-' is valid") {
    CHECK(xtel::is_valid_plugin_name("csv"));
    CHECK(xtel::is_valid_plugin_name("My-exporter_2"));
    CHECK(xtel::is_valid_plugin_name(std::string(xtel::max_plugin_name_length, 'a')));
}

TEST_CASE("a plugin name that could leave the plugin directory or is not a plain name is refused") {
    CHECK_FALSE(xtel::is_valid_plugin_name(""));
    CHECK_FALSE(xtel::is_valid_plugin_name("."));
    CHECK_FALSE(xtel::is_valid_plugin_name(".."));
    CHECK_FALSE(xtel::is_valid_plugin_name("../csv"));
    CHECK_FALSE(xtel::is_valid_plugin_name("dir/csv"));
    CHECK_FALSE(xtel::is_valid_plugin_name("csv.so"));
    CHECK_FALSE(xtel::is_valid_plugin_name("c v"));
    CHECK_FALSE(xtel::is_valid_plugin_name(std::string_view("csv\0x", 5)));
    CHECK_FALSE(xtel::is_valid_plugin_name("caf\xc3\xa9"));
    CHECK_FALSE(xtel::is_valid_plugin_name(std::string(xtel::max_plugin_name_length + 1, 'a')));
}

TEST_CASE("a plugin's file name is libtelemetry_exporter_<name>.so") {
    CHECK(xtel::plugin_file_name("csv") == "libtelemetry_exporter_csv.so");
    CHECK(xtel::plugin_file_name("my-sink_2") == "libtelemetry_exporter_my-sink_2.so");
}

TEST_CASE("an invalid plugin name is an exporter_error that quotes it and says what is accepted") {
    const auto what = exporter_error_of([] { xtel::plugin_file_name("../etc/evil"); });
    CHECK_THAT(what, Contains("'../etc/evil'"));
    CHECK_THAT(what, Contains("letters, digits, '_' or '-'"));
}

TEST_CASE("an invalid plugin name is refused before the plugin directory is looked at") {
    // The directory does not exist either; the name is the first thing reported.
    const auto what =
        exporter_error_of([] { xtel::plugin_library("no/such/directory", "../csv"); });
    CHECK_THAT(what, Contains("'../csv'"));
    CHECK_THAT(what, !Contains("no/such/directory"));
}

TEST_CASE("no plugin is available without a plugin directory") {
    xtel::config cfg;
    CHECK_FALSE(xtel::plugin_available(cfg, "csv"));
}

TEST_CASE("a plugin is available when its directory holds a file of its name, and only then") {
    const temp_dir dir;
    write_file(dir.path() / "libtelemetry_exporter_present.so", "");
    xtel::config cfg;
    cfg.plugin_dir = dir.path();
    CHECK(xtel::plugin_available(cfg, "present"));
    CHECK_FALSE(xtel::plugin_available(cfg, "absent"));
    CHECK_FALSE(xtel::plugin_available(cfg, "../present"));
}

TEST_CASE("list_plugins names the files named like plugins, sorted, and nothing else") {
    const temp_dir dir;
    write_file(dir.path() / "libtelemetry_exporter_zeta.so", "");
    write_file(dir.path() / "libtelemetry_exporter_alpha.so", "");
    write_file(dir.path() / "libtelemetry_exporter_.so", "");
    write_file(dir.path() / "libtelemetry_exporter_dot.ted.so", "");
    write_file(dir.path() / "libtelemetry_exporter_beta.so.1", "");
    write_file(dir.path() / "README", "");
    CHECK(xtel::list_plugins(dir.path()) == std::vector<std::string>{"alpha", "zeta"});
}

TEST_CASE("loading a plugin without a plugin directory names the variable and the file") {
    const auto what = exporter_error_of([] { xtel::plugin_library("", "csv"); });
    CHECK_THAT(what, Contains("NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR is not set"));
    CHECK_THAT(what, Contains("libtelemetry_exporter_csv.so"));
}

TEST_CASE("loading a plugin from a directory that does not exist names the directory") {
    const temp_dir dir;
    const auto missing = dir.path() / "gone";
    const auto what = exporter_error_of([&] { xtel::plugin_library(missing, "csv"); });
    CHECK_THAT(what, Contains(missing.string()));
    CHECK_THAT(what, Contains("does not exist"));
}

TEST_CASE("loading a plugin whose file does not exist names the file and lists those present") {
    const temp_dir dir;
    write_file(dir.path() / "libtelemetry_exporter_other.so", "");
    const auto what = exporter_error_of([&] { xtel::plugin_library(dir.path(), "csv"); });
    CHECK_THAT(what, Contains((dir.path() / "libtelemetry_exporter_csv.so").string()));
    CHECK_THAT(what, Contains("the file does not exist"));
    CHECK_THAT(what, Contains("plugins in " + dir.path().string() + ": other"));
}

TEST_CASE("a directory named like a plugin is refused as not a regular file") {
    const temp_dir dir;
    std::filesystem::create_directory(dir.path() / "libtelemetry_exporter_csv.so");
    const auto what = exporter_error_of([&] { xtel::plugin_library(dir.path(), "csv"); });
    CHECK_THAT(what, Contains((dir.path() / "libtelemetry_exporter_csv.so").string()));
    CHECK_THAT(what, Contains("is not a regular file"));
}

TEST_CASE("the plugin exporter with no plugin name is an exporter_error naming the variable") {
    xtel::config cfg;
    const auto what = exporter_error_of([&] {
        xtel::plugin_exporter e(xtel::exporter_context{cfg, "agent"});
    });
    CHECK_THAT(what, Contains("NIXL_TELEMETRY_EXPORTER"));
}

}  // namespace plugin_name_test
