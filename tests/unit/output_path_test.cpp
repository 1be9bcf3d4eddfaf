// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH has one meaning per exporter list
// (xtel/exporters/output_path.hpp): the flight recorder's directory when buffer is named, else the
// Prometheus address when prometheus is named, else only what plugins are handed.

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/buffer_settings.hpp"
#include "xtel/exporters/output_path.hpp"
#include "xtel/exporters/prometheus_settings.hpp"
#include "xtel/registry/runtime_telemetry.hpp"

namespace output_path_test {

using xtel::host_port;
using xtel::output_path_use;

namespace {

/// config::from_env with telemetry on, these exporters and this output path.
xtel::config from_env(const std::string& exporters, const std::string& output_path) {
    return xtel::config::from_env(
        xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"},
                              {"NIXL_TELEMETRY_EXPORTER", exporters},
                              {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", output_path}}));
}

}  // namespace

TEST_CASE("the output path's use is the highest the named exporters declare") {
    using names = std::vector<std::string>;
    CHECK(xtel::output_path_use_of(names{"buffer"}) == output_path_use::directory);
    CHECK(xtel::output_path_use_of(names{"prometheus"}) == output_path_use::address);
    CHECK(xtel::output_path_use_of(names{"prometheus", "buffer"}) == output_path_use::directory);
    CHECK(xtel::output_path_use_of(names{"prometheus", "csv"}) == output_path_use::address);
    CHECK(xtel::output_path_use_of(names{"csv"}) == output_path_use::none);
    CHECK(xtel::output_path_use_of(names{}) == output_path_use::none);
}

TEST_CASE("with buffer named the output path is the flight recorder's directory") {
    xtel_test::temp_dir dir;
    const auto cfg = from_env("buffer", dir.path().string());
    CHECK(xtel::buffer_settings::from_env(cfg).directory == dir.path());
}

TEST_CASE("without an output path the flight recorder is in /dev/shm") {
    const auto cfg = xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"}}));
    CHECK(xtel::buffer_settings::from_env(cfg).directory == "/dev/shm");
}

TEST_CASE("with buffer named a directory that does not exist is refused before anything starts") {
    // config::from_env reads the variables (core knows no exporter); the registry checks the
    // directory once it knows the exporters, before building any of them.
    for (const char* exporters : {"buffer", "buffer,prometheus", "prometheus,buffer"}) {
        CAPTURE(exporters);
        const auto cfg = from_env(exporters, "/nonexistent/xtel-dir");
        CHECK_THROWS_WITH(xtel::make_telemetry("a", cfg),
                          Catch::Contains("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH='/nonexistent/"
                                          "xtel-dir' is invalid") &&
                              Catch::Contains("does not exist"));
    }
    CHECK_THROWS_WITH(
        xtel::check_output_path(std::vector<std::string>{"buffer", "csv"}, "/nonexistent/xtel-dir"),
        Catch::Contains("does not exist"));
}

TEST_CASE("the buffer settings refuse a missing directory in a config made by hand") {
    CHECK_THROWS_WITH(
        xtel::buffer_settings::from_env(xtel_test::enabled_config({}, "/nonexistent/xtel-dir")),
        Catch::Contains("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH='/nonexistent/xtel-dir' is invalid"));
}

TEST_CASE("with prometheus alone the output path is the endpoint's address") {
    const auto cfg = from_env("prometheus", "127.0.0.1:0");
    CHECK(cfg.output_path == "127.0.0.1:0");
    CHECK(xtel::prometheus_settings::from_env(cfg, xtel_test::env_table({})).address ==
          host_port{"127.0.0.1", 0});
}

TEST_CASE("with buffer and prometheus the output path is buffer's and prometheus keeps its own") {
    xtel_test::temp_dir dir;
    const auto cfg = from_env("prometheus,buffer", dir.path().string());
    CHECK(xtel::buffer_settings::from_env(cfg).directory == dir.path());
    CHECK(xtel::prometheus_settings::from_env(cfg, xtel_test::env_table({})).address ==
          host_port{"127.0.0.1", 9464});
    CHECK(xtel::prometheus_settings::from_env(
              cfg, xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "[::1]:9100"}}))
              .address == host_port{"::1", 9100});
}

TEST_CASE("with only plugins named the output path is passed on as it is, not checked") {
    const auto cfg = from_env("csv", "/nonexistent/xtel-dir");
    CHECK(cfg.output_path == "/nonexistent/xtel-dir");
    CHECK(xtel::output_path_use_of(cfg.exporters) == output_path_use::none);
}

TEST_CASE("an exporter takes the output path only when it is set and nothing named outranks it") {
    CHECK_FALSE(xtel::takes_output_path(xtel_test::enabled_config({"buffer"}, ""),
                                        output_path_use::directory));
    CHECK(xtel::takes_output_path(xtel_test::enabled_config({}, "d"), output_path_use::directory));
    CHECK(xtel::takes_output_path(xtel_test::enabled_config({"prometheus"}, "d"),
                                  output_path_use::address));
    CHECK_FALSE(xtel::takes_output_path(xtel_test::enabled_config({"buffer", "prometheus"}, "d"),
                                        output_path_use::address));
    CHECK_FALSE(
        xtel::takes_output_path(xtel_test::enabled_config({"csv"}, "d"), output_path_use::none));
}

}  // namespace output_path_test
