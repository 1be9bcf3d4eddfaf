// xtel-exporter end to end: xfer_demo processes publish node files into one directory, and one
// exporter serves them all on one /metrics, with each agent's pid, leaving out what it cannot
// read and, after --stale-ttl, what a dead writer left.

#include <httplib.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include <utility>
#include <vector>

#include "exporter_support.hpp"
#include "prometheus_receiver.hpp"
#include "prometheus_support.hpp"

namespace xtel_exporter_test {

using prom_it::child_process;
using prom_it::scrape;
using prom_it::scrape_until;
using prom_it::served_port;
using prom_it::spawn_options;
using prom_it::value_of;
using xtel_test::count_of;
using xtel_test::temp_dir;

namespace {

using exporter_it::block;
using exporter_it::read_errors;
using exporter_it::start_demo;
using exporter_it::start_exporter;
using exporter_it::transfers;
using exporter_it::tx_bytes;

/// A demo staying up as agent `name` in `dir`, and an exporter over `dir` with `--stale-ttl`
/// `ttl_s`, once it serves the demo's exact byte count: how the tests that kill it begin.
struct served_demo {
    child_process demo;
    child_process exporter;
    pid_t pid = demo.pid();
    int port = served_port(exporter);
    std::string line;      ///< the start of its agent_tx_bytes_total line
    std::string expected;  ///< the bytes it wrote

    served_demo(const temp_dir& dir, const std::string& name, const std::string& ttl_s)
        : demo(start_demo(dir, name, 120)),
          exporter(start_exporter(dir, {"--stale-ttl", ttl_s})),
          line(tx_bytes(name, pid)),
          expected(std::to_string(transfers * block)) {
        REQUIRE(port > 0);
        const auto body =
            scrape_until(port, [&](const std::string& b) { return value_of(b, line) == expected; });
        REQUIRE(value_of(body, line) == expected);
    }
};

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
    CHECK(read_errors(body) == 0);
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
    for (const char* name : {"exp-good", "cut"}) {
        auto demo = start_demo(dir, name, 0);
        REQUIRE(demo.wait(std::chrono::seconds(120)) == 0);
    }
    std::mt19937 random(42);
    std::string noise(4096, '\0');
    for (auto& c : noise) {
        c = static_cast<char>(random());
    }
    prom_it::write_file(dir.path() / "x.metrics", noise);
    // The agent "cut"'s own file, cut to its first half.
    const auto real = prom_it::read_file(dir.path() / "cut.metrics");
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
    CHECK(read_errors(body) == 2);
    // Random bytes are no node file; the first half of a real one names areas it lacks.
    CHECK(read_errors(body, "not_node_file") == "1");
    CHECK(read_errors(body, "damaged") == "1");
    // exp-good, exp-good_target and cut_target.
    CHECK(value_of(body, "xtel_exporter_agents ") == "3");
    exporter.read_line("no such line", std::chrono::milliseconds(300));
    INFO(exporter.output());
    CHECK(count_of(exporter.output(), "is not served") == 2);
    CHECK(count_of(exporter.output(), "x.metrics is not served") == 1);
    CHECK(count_of(exporter.output(), "cut.metrics is not served") == 1);
}

TEST_CASE("xtel-exporter serves a killed agent for --stale-ttl, then drops it", "[exporter]") {
    const temp_dir dir;
    served_demo served(dir, "exp-dead", "2");
    const int port = served.port;
    const auto& line = served.line;

    ::kill(served.pid, SIGKILL);
    REQUIRE(served.demo.wait(std::chrono::seconds(10)));
    const auto killed = std::chrono::steady_clock::now();
    // Still served right after: its last state, from the file the dead writer left.
    CHECK(value_of(scrape(port), line) == served.expected);
    // Both agents of the process go, each its TTL after the exporter saw its writer gone: the
    // two files' locks are dropped one after the other as the process ends, and a refresh
    // between them (the watch wakes on the first close) sees one writer dead before the other.
    const auto body = scrape_until(
        port,
        [&](const std::string& s) {
            return !value_of(s, line).has_value() && value_of(s, "xtel_exporter_agents ") == "0";
        },
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
        CHECK(help.output().find("--remote-write-interval SECONDS") != std::string::npos);
        CHECK(help.output().find("--user NAME") != std::string::npos);
        CHECK(help.output().find("--allow-uid UID|NAME[,...]") != std::string::npos);
        CHECK(help.output().find("--max-file-bytes BYTES") != std::string::npos);
        CHECK(help.output().find("--max-series N") != std::string::npos);
        CHECK(help.output().find("LOCAL_RANK") != std::string::npos);
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

TEST_CASE("xtel-exporter labels the series of an agent started with RANK and LOCAL_RANK",
          "[exporter]") {
    const temp_dir dir;
    auto demo = start_demo(dir, "exp-rank", 120, {{"RANK", "3"}, {"LOCAL_RANK", "1"}});
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = fmt::format(
        R"(agent_tx_bytes_total{{agent_name="exp-rank",rank="3",local_rank="1",pid="{}",hostname=")",
        demo.pid());
    const auto expected = std::to_string(transfers * block);
    const auto body =
        scrape_until(port, [&](const std::string& s) { return value_of(s, line) == expected; });
    INFO(body);
    CHECK(value_of(body, line) == expected);
    // The target agent of the same process carries the same rank; no series of the demo lacks it.
    CHECK(value_of(body, R"(agent_tx_bytes_total{agent_name="exp-rank_target",rank="3",)") == "0");
    CHECK(count_of(body, R"({agent_name="exp-rank")") ==
          count_of(body, R"({agent_name="exp-rank",rank="3",local_rank="1",pid=")"));
}

namespace {

/// The exporter's health line `name` (a family without labels) in `body`, as a number; -1 when
/// absent.
double health(const std::string& body, const std::string& name) {
    const auto v = value_of(body, name + " ");
    return v ? std::stod(*v) : -1;
}

bool remote_write_built() {
#if XTEL_HAVE_PUSH
    return true;
#else
    return false;
#endif
}

}  // namespace

TEST_CASE("xtel-exporter pushes an agent's exact byte count to a real Prometheus by remote-write",
          "[exporter]") {
    if (std::string_view(XTEL_PROMETHEUS).empty() || !remote_write_built()) {
        WARN("SKIPPED: needs prometheus (Debian package) and XTEL_PUSH");
        return;
    }
    const temp_dir dir;
    const temp_dir prometheus_dir;
    prom_it::prometheus_receiver prom(prometheus_dir.path(), prom_it::free_port());
    auto demo = start_demo(dir, "exp-rw", 120);
    auto exporter =
        start_exporter(dir, {"--remote-write", prom.url(), "--remote-write-interval", "1"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto expected = std::to_string(transfers * block);
    const auto query =
        fmt::format(R"(agent_tx_bytes_total{{agent_name="exp-rw",pid="{}"}})", demo.pid());
    const auto value = prom.query_until(query, expected);
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(value == expected);
    // The exporter's own health travels with the agents' series.
    CHECK(prom.query_until("xtel_exporter_agents", "2") == "2");

    const auto body = scrape_until(port, [](const std::string& s) {
        return health(s, "xtel_exporter_remote_write_requests_sent_total") >= 2;
    });
    INFO(body);
    CHECK(health(body, "xtel_exporter_remote_write_requests_sent_total") >= 2);
    CHECK(health(body, "xtel_exporter_remote_write_requests_rejected_total") == 0);
    CHECK(health(body, "xtel_exporter_remote_write_requests_dropped_total") == 0);
    CHECK(health(body, "xtel_exporter_remote_write_requests_queued") >= 0);
}

TEST_CASE(
    "xtel-exporter pushes an agent's native latency histogram to a real Prometheus, one "
    "observation per transfer",
    "[exporter]") {
    if (std::string_view(XTEL_PROMETHEUS).empty() || !remote_write_built()) {
        WARN("SKIPPED: needs prometheus (Debian package) and XTEL_PUSH");
        return;
    }
    const temp_dir dir;
    const temp_dir prometheus_dir;
    prom_it::prometheus_receiver prom(prometheus_dir.path(), prom_it::free_port(),
                                      {"--enable-feature=native-histograms"});
    auto demo = start_demo(dir, "exp-native", 120, {{"NIXL_TELEMETRY_HISTOGRAM_KIND", "native"}});
    auto exporter =
        start_exporter(dir, {"--remote-write", prom.url(), "--remote-write-interval", "1"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const std::string selector = R"(xtel_transfer_duration_seconds{agent_name="exp-native"})";
    const auto count =
        prom.query_until("sum(histogram_count(" + selector + "))", std::to_string(transfers));
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(count == std::to_string(transfers));
    // The sum Prometheus stored is the one the exporter's own scrape shows, and no classic
    // bucket series came with it (native only).
    const std::string sum_line = R"(xtel_transfer_duration_seconds_sum{agent_name="exp-native")";
    const auto body = scrape_until(port, [&](const std::string& b) {
        return value_of(b, R"(xtel_transfer_duration_seconds_count{agent_name="exp-native")") ==
               std::to_string(transfers);
    });
    const auto scraped_sum = value_of(body, sum_line);
    REQUIRE(scraped_sum);
    const auto now = [](const std::string&) { return true; };
    const auto stored_sum =
        prom_it::first_value(prom.query_body_until("sum(histogram_sum(" + selector + "))", now));
    INFO("scraped " << *scraped_sum << ", stored " << stored_sum);
    CHECK(std::stod(stored_sum) == std::stod(*scraped_sum));
    CHECK(prom_it::first_value(prom.query_body_until(
              R"(count(xtel_transfer_duration_seconds_bucket{agent_name="exp-native"}))", now)) ==
          "");
}

TEST_CASE(
    "xtel-exporter counts failed remote-write attempts while the receiver is down and keeps "
    "serving",
    "[exporter]") {
    if (!remote_write_built()) {
        WARN("SKIPPED: xtel-exporter was built without XTEL_PUSH");
        return;
    }
    const temp_dir dir;
    const auto url = fmt::format("http://127.0.0.1:{}/api/v1/write", prom_it::free_port());
    auto exporter = start_exporter(dir, {"--remote-write", url, "--remote-write-interval", "1"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    // Every family is there from the first scrape, nothing sent.
    const auto first = scrape(port);
    INFO(first);
    CHECK(health(first, "xtel_exporter_remote_write_requests_sent_total") == 0);
    CHECK(health(first, "xtel_exporter_remote_write_requests_rejected_total") == 0);
    CHECK(health(first, "xtel_exporter_remote_write_requests_dropped_total") == 0);
    CHECK(health(first, "xtel_exporter_remote_write_failed_attempts_total") >= 0);
    CHECK(health(first, "xtel_exporter_remote_write_requests_queued") >= 0);

    const auto body = scrape_until(port, [](const std::string& s) {
        return health(s, "xtel_exporter_remote_write_failed_attempts_total") >= 2 &&
               health(s, "xtel_exporter_remote_write_requests_queued") >= 2;
    });
    INFO(body);
    CHECK(health(body, "xtel_exporter_remote_write_failed_attempts_total") >= 2);
    // Pushed every second, none taken: they wait in the queue.
    CHECK(health(body, "xtel_exporter_remote_write_requests_queued") >= 2);
    CHECK(health(body, "xtel_exporter_remote_write_requests_sent_total") == 0);
    CHECK(health(body, "xtel_exporter_agents") == 0);
    CHECK(exporter.exited() == std::nullopt);
    // It says so once, not at every attempt.
    exporter.read_line("no such line", std::chrono::milliseconds(300));
    CHECK(count_of(exporter.output(), "failed (") == 1);
}

TEST_CASE("xtel-exporter notices through its watch an agent killed while nobody scrapes",
          "[exporter]") {
    const temp_dir dir;
    served_demo served(dir, "exp-watch", "1");
    // The periodic rescan is 5 s apart; the kill is seen at once, so the TTL runs from it.
    ::kill(served.pid, SIGKILL);
    REQUIRE(served.demo.wait(std::chrono::seconds(10)));
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    const auto body = scrape(served.port);
    INFO(body);
    CHECK_FALSE(value_of(body, served.line).has_value());
    CHECK(value_of(body, "xtel_exporter_agents ") == "0");
}

TEST_CASE("xtel-exporter started as root with --user nobody runs as nobody and serves",
          "[exporter]") {
    if (::geteuid() != 0) {
        WARN("SKIPPED: --user needs the test to run as root");
        return;
    }
    const passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody != nullptr);
    const auto uid = std::to_string(nobody->pw_uid);
    const auto gid = std::to_string(nobody->pw_gid);
    const temp_dir dir;
    ::chmod(dir.path().c_str(), 0755);  // nobody lists it
    auto exporter = start_exporter(dir, {"--user", "nobody"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto status = prom_it::read_file(fmt::format("/proc/{}/status", exporter.pid()));
    INFO(status);
    // Real, effective, saved and file-system ids.
    CHECK(status.find(fmt::format("\nUid:\t{0}\t{0}\t{0}\t{0}\n", uid)) != std::string::npos);
    CHECK(status.find(fmt::format("\nGid:\t{0}\t{0}\t{0}\t{0}\n", gid)) != std::string::npos);
    const auto body = scrape(port);
    INFO(body);
    CHECK(value_of(body, "xtel_exporter_agents ") == "0");
    CHECK(read_errors(body) == 0);
    ::kill(exporter.pid(), SIGTERM);
    CHECK(exporter.wait(std::chrono::seconds(10)) == 0);
}

TEST_CASE(
    "xtel-exporter refuses --user or --allow-uid naming no account and limits or "
    "remote-write options it cannot use",
    "[exporter]") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--user", "xtel-no-such-user"},
             {"--remote-write-interval", "5"},
             {"--remote-write", "http://127.0.0.1:1/w", "--remote-write-interval", "0"},
             {"--remote-write", "ftp://127.0.0.1/w"},
             {"--remote-write-label", "zone=b"},
             {"--remote-write", "http://127.0.0.1:1/w", "--remote-write-label", "le=1"},
             {"--remote-write", "http://127.0.0.1:1/w", "--remote-write-label", "__name__=x"},
             {"--remote-write", "http://127.0.0.1:1/w", "--remote-write-label", "zone"},
             {"--allow-uid", "xtel-no-such-user"},
             {"--allow-uid", "1000,"},
             {"--max-file-bytes", "4096"},
             {"--max-file-bytes", "32X"},
             {"--max-series", "0"}}) {
        std::vector<std::string> argv{XTEL_EXPORTER};
        argv.insert(argv.end(), args.begin(), args.end());
        child_process bad(spawn_options{argv, {}, {}, {}});
        bad.read_line("no such line", std::chrono::seconds(10));
        INFO(bad.output());
        CHECK(bad.wait(std::chrono::seconds(10)) == 64);
        CHECK(std::count(bad.output().begin(), bad.output().end(), '\n') == 1);
        CHECK(bad.output().find(args[args.size() - 2]) != std::string::npos);
    }
}

TEST_CASE("xtel-exporter not started as root refuses --user unless it names its own user",
          "[exporter]") {
    constexpr const char* setpriv = "/usr/bin/setpriv";
    if (::geteuid() != 0 || ::access(setpriv, X_OK) != 0) {
        WARN("SKIPPED: needs root and setpriv (util-linux) to start it as nobody");
        return;
    }
    const passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody != nullptr);
    const std::vector<std::string> as_nobody{setpriv,
                                             fmt::format("--reuid={}", nobody->pw_uid),
                                             fmt::format("--regid={}", nobody->pw_gid),
                                             "--clear-groups",
                                             XTEL_EXPORTER,
                                             "--listen",
                                             "127.0.0.1:0"};
    {
        auto argv = as_nobody;
        argv.insert(argv.end(), {"--user", "root"});
        child_process refused(spawn_options{argv, {}, {}, {}});
        refused.read_line("no such line", std::chrono::seconds(10));
        INFO(refused.output());
        CHECK(refused.wait(std::chrono::seconds(10)) == 64);
        CHECK(refused.output().find("--user='root' needs root") != std::string::npos);
    }
    {
        auto argv = as_nobody;
        argv.insert(argv.end(), {"--user", "nobody"});
        child_process itself(spawn_options{argv, {}, {}, {}});
        const int port = served_port(itself);
        INFO(itself.output());
        REQUIRE(port > 0);
        CHECK(value_of(scrape(port), "xtel_exporter_agents ") == "0");
    }
}

TEST_CASE("xtel-exporter --metrics serves only the agents' families its globs choose",
          "[exporter][surface]") {
    const temp_dir dir;
    auto a = start_demo(dir, "exp-chosen", 120);  // both sets (demo_options)
    auto exporter = start_exporter(dir, {"--metrics", "agent_tx_*", "--metrics=xtel_errors_total"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = tx_bytes("exp-chosen", a.pid());
    const auto expected = std::to_string(transfers * block);
    const auto body =
        scrape_until(port, [&](const std::string& s) { return value_of(s, line) == expected; });
    INFO(body);
    CHECK(value_of(body, line) == expected);
    CHECK(body.find("\nxtel_errors_total{agent_name=\"exp-chosen\"") != std::string::npos);
    CHECK(body.find("\nagent_tx_requests_num_total{") != std::string::npos);
    // Left out: every other family of the agents; the exporter's own are all there.
    CHECK(body.find("\nagent_rx_bytes_total{") == std::string::npos);
    CHECK(body.find("\nxtel_transfer_bytes_total{") == std::string::npos);
    CHECK(body.find("\nxtel_build_info{") == std::string::npos);
    CHECK(value_of(body, "xtel_exporter_agents ") == "2");
    CHECK(read_errors(body) == 0);
    // Logged once, maybe before the line that says where it serves (read already).
    const std::string said = "family agent_rx_bytes_total is not served: --metrics leaves it out";
    const bool logged = exporter.output().find(said) != std::string::npos ||
                        exporter.read_line(said, std::chrono::seconds(10)).has_value();
    CHECK(logged);
    ::kill(exporter.pid(), SIGTERM);
    CHECK(exporter.wait(std::chrono::seconds(10)) == 0);
}

TEST_CASE("xtel-exporter refuses an empty or malformed --metrics with exit 64",
          "[exporter][surface]") {
    const temp_dir dir;
    for (const char* bad : {"", "agent tx", ",,"}) {
        INFO(bad);
        auto exporter = start_exporter(dir, {"--metrics", bad});
        CHECK(exporter.read_line(fmt::format("--metrics='{}' is invalid", bad),
                                 std::chrono::seconds(10)));
        CHECK(exporter.wait(std::chrono::seconds(10)) == 64);
    }
}

}  // namespace xtel_exporter_test
