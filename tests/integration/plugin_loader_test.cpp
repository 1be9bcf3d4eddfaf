// Real dlopen of real plugins that are wrong in one way each (tests/plugins/), through the
// pipeline the registry hands out for a plugin: telemetry<plugin_exporter>.

#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "plugin_test_support.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace plugin_loader_test {

using Catch::Matchers::Contains;
using xtel::test::exporter_error_of;
using xtel::test::log_capture;
using xtel::test::read_lines;
using xtel::test::scoped_env;
using xtel::test::temp_dir;

namespace {

const std::filesystem::path plugin_dir = XTEL_TEST_PLUGIN_DIR;

std::filesystem::path plugin_file(std::string_view name) {
    return plugin_dir / xtel::plugin_file_name(name);
}

/// Telemetry on, the one plugin `name`, output into `out`.
xtel::config plugin_config(std::string name, const std::filesystem::path& out) {
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {std::move(name)};
    cfg.plugin_dir = plugin_dir;
    cfg.output_path = out.string();
    cfg.buffer_size = 77;
    return cfg;
}

/// No flusher thread: events reach the plugin only on flush() and destruction, so what a
/// plugin sees is deterministic.
constexpr xtel::telemetry_options manual_flush{.start_flusher = false};

/// The message with which building the pipeline over plugin `name` fails.
std::string construction_error(std::string name) {
    const temp_dir out;
    const auto cfg = plugin_config(std::move(name), out.path());
    return exporter_error_of([&] { xtel::plugin_telemetry t(cfg, "agent", manual_flush); });
}

bool library_is_loaded(const std::filesystem::path& file) {
    void* const h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h != nullptr) {
        ::dlclose(h);
    }
    return h != nullptr;
}

}  // namespace

TEST_CASE(
    "a plugin without nixl_telemetry_plugin_init stops construction, naming file and entry point") {
    const auto what = construction_error("missing_init");
    CHECK_THAT(what, Contains(plugin_file("missing_init").string()));
    CHECK_THAT(what, Contains("the entry point nixl_telemetry_plugin_init() is missing"));
}

TEST_CASE("a plugin without nixl_telemetry_plugin_fini stops construction before its init runs") {
    const auto what = construction_error("missing_fini");
    CHECK_THAT(what, Contains(plugin_file("missing_fini").string()));
    CHECK_THAT(what, Contains("the entry point nixl_telemetry_plugin_fini() is missing"));
    CHECK_THAT(what, !Contains("init ran"));
}

TEST_CASE("a plugin of another API version stops construction, naming both versions") {
    const auto what = construction_error("api_mismatch");
    CHECK_THAT(what, Contains(plugin_file("api_mismatch").string()));
    CHECK_THAT(what, Contains("its plugin API version 2 does not match"));
    CHECK_THAT(what, Contains("plugins of API version 1"));
}

TEST_CASE("a plugin whose init returns null stops construction") {
    const auto what = construction_error("init_null");
    CHECK_THAT(what, Contains(plugin_file("init_null").string()));
    CHECK_THAT(what, Contains("nixl_telemetry_plugin_init() returned null"));
}

TEST_CASE("a plugin whose init throws stops construction, quoting the exception") {
    const auto what = construction_error("init_throws");
    CHECK_THAT(what, Contains(plugin_file("init_throws").string()));
    CHECK_THAT(what,
               Contains("nixl_telemetry_plugin_init() threw: the license server is unreachable"));
}

TEST_CASE("a plugin whose descriptor has no creator stops construction") {
    const auto what = construction_error("no_creator");
    CHECK_THAT(what, Contains(plugin_file("no_creator").string()));
    CHECK_THAT(what, Contains("no creator"));
}

TEST_CASE("a file named like a plugin that is not ELF stops construction as not a shared object") {
    const auto what = construction_error("not_elf");
    CHECK_THAT(what, Contains(plugin_file("not_elf").string()));
    CHECK_THAT(what, Contains("is not a shared object"));
}

TEST_CASE(
    "a plugin with an unresolved symbol stops construction with the dynamic loader's reason") {
    const auto what = construction_error("unresolved");
    CHECK_THAT(what, Contains(plugin_file("unresolved").string()));
    CHECK_THAT(what, Contains("cannot be loaded as a shared object"));
    CHECK_THAT(what, Contains("xtel_test_function_nobody_defines"));
}

TEST_CASE(
    "a plugin that is not in the directory stops construction and the present ones are listed") {
    const auto what = construction_error("absent");
    CHECK_THAT(what, Contains(plugin_file("absent").string()));
    CHECK_THAT(what, Contains("the file does not exist"));
    CHECK_THAT(what, Contains("lifecycle"));
    CHECK_THAT(what, Contains("not_elf"));
}

TEST_CASE("a plugin that fails its checks is unloaded again") {
    construction_error("api_mismatch");
    CHECK_FALSE(library_is_loaded(plugin_file("api_mismatch")));
}

TEST_CASE(
    "a plugin whose exporter constructor throws is disabled with one error, and the agent runs") {
    const temp_dir out;
    const log_capture logs;
    const auto cfg = plugin_config("ctor_throws", out.path());
    xtel::plugin_telemetry t(cfg, "agent-7", manual_flush);

    auto& plugins = t.get<xtel::plugin_exporter>();
    CHECK(plugins.active_count() == 0);
    const auto status = plugins.status();
    REQUIRE(status.size() == 1);
    CHECK_FALSE(status[0].active);
    CHECK(status[0].path == plugin_file("ctor_throws"));
    CHECK_THAT(status[0].error, Contains("the exporter's constructor threw: cannot reach the "
                                         "collector at " +
                                         out.path().string()));

    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Contains("agent 'agent-7'"));
    CHECK_THAT(errors[0], Contains(plugin_file("ctor_throws").string()));
    CHECK_THAT(errors[0], Contains("this plugin is disabled and the agent runs without it"));

    t.record(xtel::category::custom, "after", 1);
    t.flush();
    CHECK(t.stats().events_exported == 1);
    CHECK(t.stats().export_errors == 0);
}

TEST_CASE(
    "an exception from export_event is caught, counted and logged once, and later events arrive") {
    const temp_dir out;
    const log_capture logs;
    const auto cfg = plugin_config("export_throws", out.path());
    {
        xtel::plugin_telemetry t(cfg, "agent", manual_flush);
        static_assert(noexcept(t.record(xtel::category::custom, "x", 1)));
        t.record(xtel::category::custom, "good1", 1);
        t.record(xtel::category::custom, "bad1", 2);
        t.record(xtel::category::custom, "odd1", 3);
        t.record(xtel::category::custom, "good2", 4);
        t.flush();
        t.record(xtel::category::custom, "bad2", 5);
        t.record(xtel::category::custom, "good3", 6);
        t.flush();

        const auto status = t.get<xtel::plugin_exporter>().status();
        REQUIRE(status.size() == 1);
        CHECK(status[0].active);
        CHECK(status[0].failures == 3);
        // The pipeline saw no failing call: the plugin exporter handled each one itself.
        CHECK(t.stats().export_errors == 0);
        CHECK(t.stats().events_exported == 6);
    }
    CHECK(read_lines(out.path() / "agent.log") ==
          std::vector<std::string>{"good1 1", "good2 4", "good3 6"});

    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Contains(plugin_file("export_throws").string()));
    CHECK_THAT(errors[0], Contains("export_event() threw: refusing bad1"));
}

TEST_CASE("the exporter is destroyed before fini, and fini runs before the library is unloaded") {
    const temp_dir out;
    const auto log_file = out.path() / "calls";
    const scoped_env env("XTEL_TEST_PLUGIN_LOG", log_file.string());
    const auto cfg = plugin_config("lifecycle", out.path());
    {
        xtel::plugin_telemetry t(cfg, "a1", manual_flush);
        CHECK(library_is_loaded(plugin_file("lifecycle")));
        t.record(xtel::category::memory, "e1", 5);
        t.record(xtel::category::memory, "e2", 6);
    }
    CHECK(read_lines(log_file) == std::vector<std::string>{
                                      "init",
                                      "create a1 77 " + out.path().string(),
                                      "event e1 5",
                                      "event e2 6",
                                      "flush a1",
                                      "destroy a1",
                                      "fini",
                                  });
    CHECK_FALSE(library_is_loaded(plugin_file("lifecycle")));
}

TEST_CASE("two agents in one process share one load of a plugin: init and fini run once") {
    const temp_dir out;
    const auto log_file = out.path() / "calls";
    const scoped_env env("XTEL_TEST_PLUGIN_LOG", log_file.string());
    const auto cfg = plugin_config("lifecycle", out.path());
    {
        auto first = std::make_unique<xtel::plugin_telemetry>(cfg, "a1", manual_flush);
        const xtel::plugin_telemetry second(cfg, "a2", manual_flush);
        first.reset();
        CHECK(library_is_loaded(plugin_file("lifecycle")));
    }
    const auto calls = read_lines(log_file);
    CHECK(std::count(calls.begin(), calls.end(), "init") == 1);
    CHECK(std::count(calls.begin(), calls.end(), "fini") == 1);
    REQUIRE(calls.size() >= 2);
    CHECK(calls.front() == "init");
    CHECK(calls.back() == "fini");
    CHECK(std::count(calls.begin(), calls.end(), "destroy a1") == 1);
    CHECK(std::count(calls.begin(), calls.end(), "destroy a2") == 1);
    CHECK_FALSE(library_is_loaded(plugin_file("lifecycle")));
}

TEST_CASE(
    "a loaded plugin reports its name, path and version, and warns when it names itself "
    "otherwise") {
    const temp_dir out;
    const log_capture logs;
    const auto cfg = plugin_config("lifecycle", out.path());
    xtel::plugin_telemetry t(cfg, "agent", manual_flush);

    const auto status = t.get<xtel::plugin_exporter>().status();
    REQUIRE(status.size() == 1);
    CHECK(status[0].name == "lifecycle");
    CHECK(status[0].path == plugin_file("lifecycle"));
    CHECK(status[0].version == "0.3.1");
    CHECK(status[0].active);

    const auto warnings = logs.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains("its descriptor names it 'recorder'"));
}

TEST_CASE("the plugins named in the configuration are all loaded, in order") {
    const temp_dir out;
    auto cfg = plugin_config("lifecycle", out.path());
    cfg.exporters.push_back("export_throws");
    xtel::plugin_telemetry t(cfg, "agent", manual_flush);
    t.record(xtel::category::custom, "both", 9);
    t.flush();
    const auto status = t.get<xtel::plugin_exporter>().status();
    REQUIRE(status.size() == 2);
    CHECK(status[0].name == "lifecycle");
    CHECK(status[1].name == "export_throws");
    CHECK(read_lines(out.path() / "agent.log") == std::vector<std::string>{"both 9"});
}

}  // namespace plugin_loader_test
