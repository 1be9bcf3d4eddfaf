// xtel-exporter end to end: xfer_demo processes publish node files into one directory, and one
// exporter serves them all on one /metrics, with each agent's pid, leaving out what it cannot
// read and, after --stale-ttl, what a dead writer left.

#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "prometheus_support.hpp"

using prom_it::child_process;
using prom_it::scrape;
using prom_it::scrape_until;
using prom_it::served_port;
using prom_it::spawn_options;
using prom_it::value_of;
using xtel_test::temp_dir;

namespace {

constexpr std::uint64_t transfers = 50;
constexpr std::uint64_t block = 65536;

/// xfer_demo moving transfers x block bytes as agent `name` (its target is `name`_target) with
/// the node exporter writing into `dir`; staying up `linger_s` seconds after.
child_process start_demo(const temp_dir& dir, const std::string& name, int linger_s) {
    spawn_options o;
    o.argv = {XTEL_XFER_DEMO,
              "--op",
              "write",
              "--total",
              std::to_string(transfers * block),
              "--block",
              std::to_string(block),
              "--initiator-name",
              name,
              "--target-name",
              name + "_target",
              "--linger",
              std::to_string(linger_s)};
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_EXPORTER", "node"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"}};
    return child_process(o);
}

/// xtel-exporter over `dir` on a port the system picks, with `extra` arguments.
child_process start_exporter(const temp_dir& dir, std::vector<std::string> extra = {}) {
    spawn_options o;
    o.argv = {XTEL_EXPORTER, "--listen", "127.0.0.1:0", "--dir", dir.path().string()};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    return child_process(o);
}

/// The prefix of agent `name`'s agent_tx_bytes_total line, written by process `pid`.
std::string tx_bytes(std::string_view name, pid_t pid) {
    return fmt::format(R"(agent_tx_bytes_total{{agent_name="{}",pid="{}",hostname=")", name, pid);
}

std::size_t count_of(std::string_view text, std::string_view part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) {
        ++n;
    }
    return n;
}

}  // namespace

TEST_CASE("xtel-exporter serves every agent of the directory with its pid and exact byte counts",
          "[exporter]") {
    const temp_dir dir;
    auto a = start_demo(dir, "exp-a", 120);
    auto b = start_demo(dir, "exp-b", 120);
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto a_line = tx_bytes("exp-a", a.pid());
    const auto b_line = tx_bytes("exp-b", b.pid());
    const auto expected = std::to_string(transfers * block);
    const auto body = scrape_until(port, [&](const std::string& s) {
        return value_of(s, a_line) == expected && value_of(s, b_line) == expected;
    });
    INFO(body);
    CHECK(value_of(body, a_line) == expected);
    CHECK(value_of(body, b_line) == expected);
    // A family with a pid label of its own is served with the writer's only.
    CHECK(value_of(body,
                   fmt::format(R"(xtel_agent_info{{agent_name="exp-a",pid="{}",backend="ucx"}})",
                               a.pid())) == "1");
    // Each demo process holds two agents, the initiator and its target.
    CHECK(value_of(body, "xtel_exporter_agents ") == "4");
    CHECK(value_of(body, "xtel_exporter_agents_seen_total ") == "4");
    CHECK(value_of(body, "xtel_exporter_snapshot_read_errors_total ") == "0");
    CHECK(value_of(body, "xtel_exporter_scrape_duration_seconds_count ").has_value());
    CHECK(value_of(body, "process_resident_memory_bytes ").has_value());

    // promtool parses it; its only complaints are about the names NIXL's dashboards use.
    const auto input = dir.path() / "metrics.txt";
    const auto output = dir.path() / "promtool.txt";
    prom_it::write_file(input, body);
    child_process promtool(spawn_options{{XTEL_PROMTOOL, "check", "metrics"}, {}, input, output});
    const auto status = promtool.wait(std::chrono::seconds(30));
    const auto said = prom_it::read_file(output);
    INFO("promtool said:\n" << said);
    CHECK((status == 0 || status == 3));
    CHECK(said.find("xtel_exporter") == std::string::npos);

    // SIGTERM stops it cleanly.
    ::kill(exporter.pid(), SIGTERM);
    CHECK(exporter.wait(std::chrono::seconds(10)) == 0);
}

TEST_CASE("xtel-exporter skips a foreign and a truncated file, logging each once", "[exporter]") {
    const temp_dir dir;
    {
        auto demo = start_demo(dir, "exp-good", 0);
        REQUIRE(demo.wait(std::chrono::seconds(120)) == 0);
    }
    std::mt19937 random(42);
    std::string noise(4096, '\0');
    for (auto& c : noise) {
        c = static_cast<char>(random());
    }
    prom_it::write_file(dir.path() / "x.metrics", noise);
    const auto real = prom_it::read_file(dir.path() / "exp-good.metrics");
    REQUIRE(real.size() > 512);
    prom_it::write_file(dir.path() / "cut.metrics",
                        std::string_view(real).substr(0, real.size() / 2));

    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    // Several refreshes (scrapes and scans) later, each bad file has still been counted once.
    std::string body;
    for (int i = 0; i < 8; ++i) {
        body = scrape(port);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    INFO(body);
    const auto good = value_of(body, R"(agent_tx_bytes_total{agent_name="exp-good",)");
    CHECK(good == std::to_string(transfers * block));
    CHECK(value_of(body, "xtel_exporter_snapshot_read_errors_total ") == "2");
    CHECK(value_of(body, "xtel_exporter_agents ") == "2");
    exporter.read_line("no such line", std::chrono::milliseconds(300));
    INFO(exporter.output());
    CHECK(count_of(exporter.output(), "is not served") == 2);
    CHECK(count_of(exporter.output(), "x.metrics is not served") == 1);
    CHECK(count_of(exporter.output(), "cut.metrics is not served") == 1);
}

TEST_CASE("xtel-exporter serves a killed agent for --stale-ttl, then drops it", "[exporter]") {
    const temp_dir dir;
    auto demo = start_demo(dir, "exp-dead", 120);
    const pid_t pid = demo.pid();
    auto exporter = start_exporter(dir, {"--stale-ttl", "2"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = tx_bytes("exp-dead", pid);
    const auto expected = std::to_string(transfers * block);
    auto body =
        scrape_until(port, [&](const std::string& s) { return value_of(s, line) == expected; });
    REQUIRE(value_of(body, line) == expected);

    ::kill(pid, SIGKILL);
    REQUIRE(demo.wait(std::chrono::seconds(10)));
    const auto killed = std::chrono::steady_clock::now();
    // Still served right after: its last state, from the file the dead writer left.
    CHECK(value_of(scrape(port), line) == expected);
    body = scrape_until(
        port, [&](const std::string& s) { return !value_of(s, line).has_value(); },
        std::chrono::seconds(15));
    const auto gone_after = std::chrono::steady_clock::now() - killed;
    INFO(body);
    CHECK_FALSE(value_of(body, line).has_value());
    CHECK(gone_after >= std::chrono::seconds(2));
    CHECK(gone_after < std::chrono::seconds(10));
    CHECK(value_of(body, "xtel_exporter_agents ") == "0");
    // The file is left alone.
    CHECK(std::filesystem::exists(dir.path() / "exp-dead.metrics"));
}

TEST_CASE("xtel-exporter --help prints its usage, and a bad --listen exits 64", "[exporter]") {
    {
        child_process help(spawn_options{{XTEL_EXPORTER, "--help"}, {}, {}, {}});
        help.read_line("no such line", std::chrono::seconds(10));
        CHECK(help.wait(std::chrono::seconds(10)) == 0);
        CHECK(help.output().find("Usage: xtel-exporter") != std::string::npos);
        CHECK(help.output().find("--stale-ttl") != std::string::npos);
    }
    {
        child_process bad(
            spawn_options{{XTEL_EXPORTER, "--listen", "localhost:99999"}, {}, {}, {}});
        bad.read_line("no such line", std::chrono::seconds(10));
        CHECK(bad.wait(std::chrono::seconds(10)) == 64);
        INFO(bad.output());
        CHECK(bad.output().find("--listen='localhost:99999' is invalid") != std::string::npos);
        CHECK(std::count(bad.output().begin(), bad.output().end(), '\n') == 1);
    }
}
