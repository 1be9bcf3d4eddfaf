#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "test_util.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"

namespace config_test {

TEST_CASE("telemetry is off when NIXL_TELEMETRY_ENABLE is unset") {
    const auto c = xtel::config::from_env(xtel_test::env_table({}));
    CHECK_FALSE(c.enabled);
}

TEST_CASE("every spelling of on and off is accepted in any letter case") {
    const auto [value, expected] = GENERATE(table<std::string, bool>({{"y", true},
                                                                      {"Y", true},
                                                                      {"yes", true},
                                                                      {"YeS", true},
                                                                      {"on", true},
                                                                      {"ON", true},
                                                                      {"1", true},
                                                                      {"true", true},
                                                                      {"TRUE", true},
                                                                      {"n", false},
                                                                      {"N", false},
                                                                      {"no", false},
                                                                      {"No", false},
                                                                      {"off", false},
                                                                      {"OFF", false},
                                                                      {"0", false},
                                                                      {"false", false},
                                                                      {"False", false}}));
    CAPTURE(value);
    CHECK(
        xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", value}})).enabled ==
        expected);
}

TEST_CASE("defaults apply when only NIXL_TELEMETRY_ENABLE is set") {
    const auto c = xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"}}));
    CHECK(c.enabled);
    CHECK(c.buffer_size == 4096);
    CHECK(c.run_interval == std::chrono::milliseconds(100));
    CHECK(c.exporters == std::vector<std::string>{"buffer"});
    CHECK(c.output_path.empty());
    CHECK(c.plugin_dir.empty());
    CHECK(c.timing_sample == 256);
}

TEST_CASE("well-formed values are read") {
    xtel_test::temp_dir dir;
    const auto c = xtel::config::from_env(xtel_test::env_table({
        {"NIXL_TELEMETRY_ENABLE", "on"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "65536"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "25"},
        {"NIXL_TELEMETRY_TIMING_SAMPLE", "1"},
        {"NIXL_TELEMETRY_EXPORTER", "buffer, custom-1"},
        {"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR", dir.path().string()},
        {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
    }));
    CHECK(c.buffer_size == 65536);
    CHECK(c.run_interval == std::chrono::milliseconds(25));
    CHECK(c.timing_sample == 1);
    CHECK(c.exporters == std::vector<std::string>{"buffer", "custom-1"});
    CHECK(c.exporters_string() == "buffer,custom-1");
    CHECK(c.plugin_dir == dir.path());
    CHECK(c.output_path == dir.path().string());
}

TEST_CASE("a stale malformed value does not stop an agent whose telemetry is off") {
    const auto c = xtel::config::from_env(xtel_test::env_table(
        {{"NIXL_TELEMETRY_ENABLE", "0"}, {"NIXL_TELEMETRY_BUFFER_SIZE", "lots"}}));
    CHECK_FALSE(c.enabled);
}

TEST_CASE("every malformed value is refused with the variable, the value and what is accepted") {
    struct bad_case {
        const char* variable;
        std::string value;
        const char* accepted;  // a fragment the message must contain
    };
    const auto missing_dir = std::string("/nonexistent/xtel-test-dir");
    const auto c = GENERATE_COPY(values<bad_case>({
        {"NIXL_TELEMETRY_ENABLE", "", "expected one of y, yes"},
        {"NIXL_TELEMETRY_ENABLE", "maybe", "expected one of y, yes"},
        {"NIXL_TELEMETRY_ENABLE", "yes please", "expected one of y, yes"},
        {"NIXL_TELEMETRY_ENABLE", "2", "expected one of y, yes"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "abc", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "4096k", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "0", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "-5", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", " 64", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "16777217", "whole number from 1 to 16777216"},
        {"NIXL_TELEMETRY_BUFFER_SIZE", "99999999999999999999999", "whole number from 1"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "fast", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "100ms", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "0", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "-100", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "1.5", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_RUN_INTERVAL", "3600001", "whole number from 1 to 3600000"},
        {"NIXL_TELEMETRY_TIMING_SAMPLE", "", "whole number from 1 to 1048576"},
        {"NIXL_TELEMETRY_TIMING_SAMPLE", "0", "whole number from 1 to 1048576"},
        {"NIXL_TELEMETRY_TIMING_SAMPLE", "all", "whole number from 1 to 1048576"},
        {"NIXL_TELEMETRY_TIMING_SAMPLE", "1048577", "whole number from 1 to 1048576"},
        {"NIXL_TELEMETRY_EXPORTER", "", "comma-separated list of exporter names"},
        {"NIXL_TELEMETRY_EXPORTER", "buffer,", "comma-separated list of exporter names"},
        {"NIXL_TELEMETRY_EXPORTER", "../evil", "comma-separated list of exporter names"},
        {"NIXL_TELEMETRY_EXPORTER", "a/b", "comma-separated list of exporter names"},
        {"NIXL_TELEMETRY_EXPORTER", "buffer,buffer", "named twice"},
        {"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR", "", "existing directory"},
        {"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR", missing_dir, "does not exist"},
        {"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR", "/dev/null", "not a directory"},
        {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", "", "non-empty value"},
    }));
    CAPTURE(c.variable, c.value);
    std::map<std::string, std::string> vars{{"NIXL_TELEMETRY_ENABLE", "y"}};
    vars[c.variable] = c.value;
    try {
        (void)xtel::config::from_env(xtel_test::env_table(vars));
        FAIL("no exception for " << c.variable << "='" << c.value << "'");
    } catch (const xtel::config_error& e) {
        const std::string msg = e.what();
        CHECK_THAT(msg, Catch::Contains(c.variable));
        CHECK_THAT(msg, Catch::Contains("'" + c.value + "'"));
        CHECK_THAT(msg, Catch::Contains(c.accepted));
    }
}

TEST_CASE("a config error is an xtel::error") {
    CHECK_THROWS_AS(
        xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "sure"}})),
        xtel::error);
}

TEST_CASE("agent names that would escape the output directory are refused") {
    for (const char* bad : {"", ".", "..", "a/b", "/abs", "name with space"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(xtel::parse::file_name("agent name", bad), xtel::config_error);
    }
    CHECK_NOTHROW(xtel::parse::file_name("agent name", "agent-0.rank_3"));
}

TEST_CASE("a comma-separated list is split into its items with the spaces around them trimmed") {
    using xtel::parse::repeats;
    CHECK(xtel::parse::comma_list("V", " a , b,\tc ", "accepted", repeats::refused) ==
          std::vector<std::string_view>{"a", "b", "c"});
    CHECK(xtel::parse::comma_list("V", "only", "accepted", repeats::refused) ==
          std::vector<std::string_view>{"only"});
    CHECK(xtel::parse::comma_list("V", "1,1", "accepted", repeats::allowed) ==
          std::vector<std::string_view>{"1", "1"});
}

TEST_CASE("an empty item in a comma-separated list is refused with what is accepted") {
    for (const char* bad : {"", " ", "a,,b", "a, ,b", ",a", "a,"}) {
        CAPTURE(bad);
        try {
            (void)xtel::parse::comma_list("SOME_VAR", bad, "expected names",
                                          xtel::parse::repeats::allowed);
            FAIL("no exception");
        } catch (const xtel::config_error& e) {
            CHECK(std::string(e.what()) ==
                  std::string("SOME_VAR='") + bad + "' is invalid: expected names");
        }
    }
}

TEST_CASE("an item given twice is refused when repeats are, naming the item") {
    try {
        (void)xtel::parse::comma_list("SOME_VAR", "a, b ,b", "expected names",
                                      xtel::parse::repeats::refused);
        FAIL("no exception");
    } catch (const xtel::config_error& e) {
        CHECK(std::string(e.what()) ==
              "SOME_VAR='a, b ,b' is invalid: b is named twice; expected names");
    }
}

TEST_CASE("a configuration error shows the control bytes of a value escaped on one line") {
    try {
        xtel::parse::fail("SOME_VAR", "a\r\nb\tc\x01\x7f d\xc3\xa9", "expected no \n");
        FAIL("no exception");
    } catch (const xtel::config_error& e) {
        CHECK(std::string(e.what()) ==
              "SOME_VAR='a\\r\\nb\\tc\\x01\\x7f d\xc3\xa9' is invalid: expected no \\n");
    }
}

TEST_CASE("an empty output path is refused where the variables are read") {
    try {
        (void)xtel::config::from_env(xtel_test::env_table(
            {{"NIXL_TELEMETRY_ENABLE", "y"}, {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", ""}}));
        FAIL("no exception");
    } catch (const xtel::config_error& e) {
        CHECK(std::string(e.what()) ==
              "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH='' is invalid: expected a non-empty value (a "
              "directory or an address, as the exporters named take it: docs/configuration.md)");
    }
}

// Upstream NIXL's variables (docs/configuration.md, "NIXL's variables"): each is read with the
// meaning it has there, mapped onto xtel's, or said once with what to use instead.

TEST_CASE("NIXL's enable and disable turn telemetry on and off in any letter case") {
    using xtel_test::env_table;
    CHECK(xtel::config::from_env(env_table({{"NIXL_TELEMETRY_ENABLE", "Enable"}})).enabled);
    CHECK_FALSE(xtel::config::from_env(env_table({{"NIXL_TELEMETRY_ENABLE", "DISABLE"}})).enabled);
}

TEST_CASE("upstream's variables are not read when telemetry is disabled") {
    const xtel_test::log_capture log;
    const auto c =
        xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "disable"},
                                                     {"NIXL_TELEMETRY_DIR", ""},
                                                     {"NIXL_TELEMETRY_MULTIPROC_DIR", "/x"},
                                                     {"NIXL_PLUGIN_DIR", "/nonexistent"}}));
    CHECK_FALSE(c.enabled);
    CHECK(c.output_path.empty());
    CHECK(log.all().empty());
}

TEST_CASE("NIXL_TELEMETRY_DIR is the flight recorder's directory when the output path is unset") {
    const xtel_test::temp_dir dir;
    const auto c = xtel::config::from_env(xtel_test::env_table(
        {{"NIXL_TELEMETRY_ENABLE", "y"}, {"NIXL_TELEMETRY_DIR", dir.path().string()}}));
    CHECK(c.output_path == dir.path().string());
}

TEST_CASE("NIXL_TELEMETRY_DIR and the output path are one setting and must agree") {
    const xtel_test::temp_dir dir;
    const auto same = xtel::config::from_env(
        xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"},
                              {"NIXL_TELEMETRY_DIR", dir.path().string()},
                              {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}}));
    CHECK(same.output_path == dir.path().string());
    CHECK_THROWS_WITH(
        xtel::config::from_env(
            xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"},
                                  {"NIXL_TELEMETRY_DIR", "/tmp"},
                                  {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", "/dev/shm"}})),
        "NIXL_TELEMETRY_DIR='/tmp' is invalid: NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH='/dev/shm' is "
        "set too and names another place; both name the flight recorder's directory: set one of "
        "them, or both to the same directory");
}

TEST_CASE("an empty NIXL_TELEMETRY_DIR is refused") {
    CHECK_THROWS_WITH(
        xtel::config::from_env(
            xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"}, {"NIXL_TELEMETRY_DIR", ""}})),
        "NIXL_TELEMETRY_DIR='' is invalid: expected the path of an existing directory");
}

TEST_CASE("NIXL_PLUGIN_DIR is where plug-ins are looked for unless xtel's own variable is set") {
    const xtel_test::temp_dir nixl, own;
    const auto mapped = xtel::config::from_env(xtel_test::env_table(
        {{"NIXL_TELEMETRY_ENABLE", "y"}, {"NIXL_PLUGIN_DIR", nixl.path().string()}}));
    CHECK(mapped.plugin_dir == nixl.path());
    const auto own_wins = xtel::config::from_env(
        xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"},
                              {"NIXL_PLUGIN_DIR", nixl.path().string()},
                              {"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR", own.path().string()}}));
    CHECK(own_wins.plugin_dir == own.path());
}

TEST_CASE("a NIXL_PLUGIN_DIR that is no directory is said once and passed over") {
    const xtel_test::log_capture log;
    const auto c = xtel::config::from_env(xtel_test::env_table(
        {{"NIXL_TELEMETRY_ENABLE", "y"}, {"NIXL_PLUGIN_DIR", "/nonexistent/nixl/plugins"}}));
    CHECK(c.plugin_dir.empty());
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "NIXL_PLUGIN_DIR='/nonexistent/nixl/plugins' is not an existing directory: no telemetry "
          "exporter plug-in is looked for there (NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR names xtel's "
          "plug-in directory)");
}

TEST_CASE(
    "each upstream variable of an exporter xtel lacks is said once with what to use instead") {
    const auto [var, instead] = GENERATE(table<std::string, std::string>({
        {"NIXL_TELEMETRY_MULTIPROC_DIR", "run one xtel-exporter per node"},
        {"NIXL_TELEMETRY_MP_STALE_TTL", "xtel-exporter's --stale-ttl"},
        {"NIXL_TELEMETRY_CSV_FILE", "xtel's (examples/plugins/csv) writes"},
        {"NIXL_TELEMETRY_DOCA_BACKENDS", "xtel has no DOCA exporter"},
        {"NIXL_TELEMETRY_DOCA_IPC_SOCKETS_DIR", "xtel has no DOCA exporter"},
        {"NIXL_TELEMETRY_DOCA_PROMETHEUS_PORT", "xtel has no DOCA exporter"},
        {"NIXL_TELEMETRY_DOCA_PROMETHEUS_LOCAL", "xtel has no DOCA exporter"},
    }));
    INFO(var);
    const xtel_test::log_capture log;
    const auto c =
        xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"}, {var, "v1"}}));
    CHECK(c.enabled);
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::StartsWith(var + "='v1' is not read by xtel: "));
    CHECK_THAT(warnings[0], Catch::Contains(instead));
}

}  // namespace config_test
