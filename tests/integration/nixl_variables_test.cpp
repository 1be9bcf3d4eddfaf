// Upstream NIXL's variables in a real process (xfer_demo): the directory and the port a NIXL
// deployment sets are where xtel writes and listens, and an exporter xtel does not have stops
// the program at start with what to use instead (docs/configuration.md, "NIXL's variables").

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>

#include "prometheus_support.hpp"

namespace nixl_variables_test {

using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::temp_dir;

#if defined(XTEL_XFER_DEMO)

namespace {

using namespace std::chrono_literals;

/// xfer_demo moving `total` bytes between an initiator and a target named after `name`.
std::vector<std::string> demo_argv(const std::string& name, std::uint64_t total) {
    return {XTEL_XFER_DEMO,        "--op",          "write",         "--total",
            std::to_string(total), "--block",       "4096",          "--initiator-name",
            name + "_initiator",   "--target-name", name + "_target"};
}

}  // namespace

TEST_CASE("xfer_demo writes its flight recorders into NIXL_TELEMETRY_DIR", "[nixl_variables]") {
    const temp_dir dir;
    spawn_options o;
    o.argv = demo_argv("dir", 64 * 4096);
    o.env = {{"NIXL_TELEMETRY_ENABLE", "yes"},
             {"NIXL_TELEMETRY_EXPORTER", "BUFFER"},
             {"NIXL_TELEMETRY_DIR", dir.path().string()}};
    child_process demo(o);
    (void)demo.read_line("no line says this", 60s);  // all it says, up to its end
    INFO(demo.output());
    REQUIRE(demo.wait(30s) == 0);
    CHECK(std::filesystem::is_regular_file(dir.path() / "dir_initiator"));
    CHECK(std::filesystem::is_regular_file(dir.path() / "dir_target"));
}

TEST_CASE("xfer_demo serves /metrics on NIXL_TELEMETRY_PROMETHEUS_PORT with _LOCAL set",
          "[nixl_variables]") {
    const auto port = prom_it::free_port();
    REQUIRE(port != 0);
    spawn_options o;
    o.argv = demo_argv("port", 16 * 4096);
    o.argv.insert(o.argv.end(), {"--linger", "120"});
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_METRIC_SET", "nixl"},  // a NIXL deployment's names
             {"NIXL_TELEMETRY_EXPORTER", "prometheus"},
             {"NIXL_TELEMETRY_PROMETHEUS_PORT", std::to_string(port)},
             {"NIXL_TELEMETRY_PROMETHEUS_LOCAL", "y"},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"},
             {"XTEL_LOG_LEVEL", "info"}};
    child_process demo(o);
    const auto served = prom_it::served_port(demo);
    INFO(demo.output());
    REQUIRE(served == port);
    const auto body = prom_it::scrape_until(port, [](const std::string& b) {
        return prom_it::sum_of(b, "agent_tx_bytes_total{") == 16 * 4096;
    });
    CHECK(prom_it::sum_of(body, "agent_tx_bytes_total{") == 16 * 4096);
}

TEST_CASE("xfer_demo refuses upstream's prometheus_mp at start and names what to use instead",
          "[nixl_variables]") {
    spawn_options o;
    o.argv = demo_argv("mp", 4096);
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_EXPORTER", "prometheus_mp"},
             {"NIXL_TELEMETRY_MULTIPROC_DIR", "/nonexistent"}};
    child_process demo(o);
    const auto line = demo.read_line("xfer_demo: NIXL_TELEMETRY_EXPORTER", 30s);
    INFO(demo.output());
    REQUIRE(line);
    CHECK_THAT(*line, Catch::Contains("'prometheus_mp' is invalid: 'prometheus_mp': it is "
                                      "upstream NIXL's multi-process Prometheus exporter"));
    CHECK_THAT(*line, Catch::Contains("run one xtel-exporter per node"));
    CHECK(demo.wait(30s) == 2);
}

#endif

}  // namespace nixl_variables_test
