// What xtel-exporter says of each agent rather than its series: the state of its writer (live,
// closed, dead), and the agents that could not publish a node file at all (a second xfer_demo
// with a live agent's name), on /metrics and in xtel top, with real processes and files.

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "exporter_support.hpp"
#include "prometheus_support.hpp"

namespace agent_state_test {

using prom_it::child_process;
using prom_it::scrape;
using prom_it::scrape_until;
using prom_it::served_port;
using prom_it::value_of;
using xtel_test::count_of;
using xtel_test::temp_dir;

namespace {

using exporter_it::demo_options;
using exporter_it::start_demo;
using exporter_it::start_exporter;

/// The xtel_exporter_agent_state line of agent `name` in process `pid` for `state`.
std::string state_line(std::string_view name, pid_t pid, std::string_view state) {
    return fmt::format(R"(xtel_exporter_agent_state{{agent_name="{}",pid="{}",state="{}"}} )", name,
                       pid, state);
}

/// Whether `body` says agent `name` of `pid` is in `state` alone: 1 there, 0 in the others.
bool in_state(const std::string& body, std::string_view name, pid_t pid, std::string_view state) {
    for (const std::string_view s : {"live", "closed", "dead"}) {
        if (value_of(body, state_line(name, pid, s)) != (s == state ? "1" : "0")) {
            return false;
        }
    }
    return true;
}

std::string unpublished_line(std::string_view name, pid_t pid, std::string_view reason) {
    return fmt::format(
        R"(xtel_exporter_agent_unpublished{{agent_name="{}",pid="{}",reason="{}"}} )", name, pid,
        reason);
}

/// A second xfer_demo whose initiator takes the live agent `taken`'s name (its target a free
/// one), staying up `linger_s` seconds.
child_process start_twin(const temp_dir& dir, const std::string& taken, int linger_s) {
    auto o = demo_options(dir.path(), taken, linger_s);
    const auto target = std::find(o.argv.begin(), o.argv.end(), "--target-name");
    REQUIRE(target != o.argv.end());
    *(target + 1) = taken + "_twin_target";
    return child_process(o);
}

}  // namespace

TEST_CASE("xtel-exporter shows a live, a cleanly stopped and a killed agent in their states",
          "[exporter][agent_state]") {
    const temp_dir dir;
    auto closed = start_demo(dir, "st-closed", 0);
    const pid_t closed_pid = closed.pid();  // pid() is no more once waited for
    REQUIRE(closed.wait(std::chrono::seconds(120)) == 0);
    auto live = start_demo(dir, "st-live", 120);
    auto dead = start_demo(dir, "st-dead", 120);
    const pid_t dead_pid = dead.pid();
    auto exporter = start_exporter(dir, {"--stale-ttl", "120"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    auto body = scrape_until(port, [&](const std::string& b) {
        return in_state(b, "st-live", live.pid(), "live") &&
               in_state(b, "st-dead", dead_pid, "live");
    });
    INFO(body);
    CHECK(in_state(body, "st-live", live.pid(), "live"));
    CHECK(in_state(body, "st-closed", closed_pid, "closed"));
    CHECK(in_state(body, "st-closed_target", closed_pid, "closed"));
    CHECK(in_state(body, "st-dead", dead_pid, "live"));

    ::kill(dead.pid(), SIGKILL);
    REQUIRE(dead.wait(std::chrono::seconds(10)));
    body = scrape_until(port, [&](const std::string& b) {
        return in_state(b, "st-dead", dead_pid, "dead") &&
               in_state(b, "st-dead_target", dead_pid, "dead");
    });
    INFO(body);
    CHECK(in_state(body, "st-dead", dead_pid, "dead"));
    CHECK(in_state(body, "st-dead_target", dead_pid, "dead"));
    CHECK(in_state(body, "st-live", live.pid(), "live"));
    // One series per state per agent served: 6 agents.
    CHECK(count_of(body, "\nxtel_exporter_agent_state{") == 18);
    CHECK(value_of(body, "xtel_exporter_agents ") == "6");
}

TEST_CASE("xtel-exporter drops an agent's state series with its series after --stale-ttl",
          "[exporter][agent_state]") {
    const temp_dir dir;
    auto demo = start_demo(dir, "st-gone", 0);
    const pid_t pid = demo.pid();
    REQUIRE(demo.wait(std::chrono::seconds(120)) == 0);
    auto exporter = start_exporter(dir, {"--stale-ttl", "3"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    CHECK(in_state(
        scrape_until(port,
                     [&](const std::string& b) { return in_state(b, "st-gone", pid, "closed"); }),
        "st-gone", pid, "closed"));
    const auto body = scrape_until(port, [&](const std::string& b) {
        return b.find("xtel_exporter_agent_state{") == std::string::npos;
    });
    INFO(body);
    CHECK(body.find("xtel_exporter_agent_state{") == std::string::npos);
    CHECK(value_of(body, "xtel_exporter_agents ") == "0");
}

TEST_CASE("a second xfer_demo with a live agent's name is served as unpublished until it exits",
          "[exporter][unpublished]") {
    const temp_dir dir;
    auto first = start_demo(dir, "pub-a", 120);
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    auto body = scrape_until(
        port, [&](const std::string& b) { return in_state(b, "pub-a", first.pid(), "live"); });
    REQUIRE(in_state(body, "pub-a", first.pid(), "live"));
    CHECK(value_of(body, "xtel_exporter_agents_unpublished ") == "0");

    auto twin = start_twin(dir, "pub-a", 4);
    const pid_t twin_pid = twin.pid();
    // It says its node exporter is off, and names no file as if it had published one.
    const auto said = twin.read_line("initiator 'pub-a':", std::chrono::seconds(60));
    REQUIRE(said);
    CHECK(*said ==
          "initiator 'pub-a': telemetry node: 1 of its exporters off, nothing written there (the "
          "error above says why)");
    const auto line = unpublished_line("pub-a", twin_pid, "name_taken");
    body = scrape_until(port, [&](const std::string& b) { return value_of(b, line) == "1"; });
    INFO(body);
    CHECK(value_of(body, line) == "1");
    CHECK(value_of(body, "xtel_exporter_agents_unpublished ") == "1");
    // The first agent is still the one served under the name.
    CHECK(in_state(body, "pub-a", first.pid(), "live"));

    // xtel top shows it too.
    const auto top = xtel_test::run(
        {XTEL_TOP, "top", "--dir", dir.path().string(), "--once", "--interval", "0.2"});
    INFO(top.out << top.err);
    CHECK(top.exit_code == 0);
    CHECK(count_of(top.out, fmt::format("not published: agent pub-a pid {} could not publish "
                                        "{}/pub-a.metrics: name_taken: node file ",
                                        twin_pid, dir.path().string())) == 1);

    REQUIRE(twin.wait(std::chrono::seconds(60)) == 0);
    CHECK(twin.output().find(fmt::format("{}/pub-a.metrics: in use by the live writer process {}",
                                         dir.path().string(), first.pid())) != std::string::npos);
    body = scrape_until(port, [&](const std::string& b) {
        return value_of(b, "xtel_exporter_agents_unpublished ") == "0";
    });
    CHECK(value_of(body, "xtel_exporter_agents_unpublished ") == "0");
    CHECK_FALSE(value_of(body, line).has_value());
    // Its clean stop took the notice away.
    CHECK_FALSE(
        std::filesystem::exists(dir.path() / fmt::format("pub-a.{}.unpublished", twin_pid)));
    // Logged once, at warning, naming the node file and the reason.
    exporter.read_line("no such line", std::chrono::milliseconds(300));
    INFO(exporter.output());
    CHECK(count_of(exporter.output(),
                   fmt::format("agent 'pub-a' (pid {}) could not publish its node file "
                               "{}/pub-a.metrics: name_taken: ",
                               twin_pid, dir.path().string())) == 1);
    CHECK(exporter_it::read_errors(body) == 0);
}

TEST_CASE("a killed agent's unpublished notice is ignored and left in the directory",
          "[exporter][unpublished]") {
    const temp_dir dir;
    auto first = start_demo(dir, "pub-k", 120);
    REQUIRE(first.read_line("lingering", std::chrono::seconds(60)));
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    auto twin = start_twin(dir, "pub-k", 120);
    const pid_t twin_pid = twin.pid();
    const auto line = unpublished_line("pub-k", twin_pid, "name_taken");
    auto body = scrape_until(port, [&](const std::string& b) { return value_of(b, line) == "1"; });
    REQUIRE(value_of(body, line) == "1");
    ::kill(twin_pid, SIGKILL);
    REQUIRE(twin.wait(std::chrono::seconds(10)));
    body = scrape_until(port, [&](const std::string& b) {
        return value_of(b, "xtel_exporter_agents_unpublished ") == "0";
    });
    INFO(body);
    CHECK(value_of(body, "xtel_exporter_agents_unpublished ") == "0");
    CHECK_FALSE(value_of(body, line).has_value());
    CHECK(std::filesystem::exists(dir.path() / fmt::format("pub-k.{}.unpublished", twin_pid)));
}

TEST_CASE(
    "xtel-exporter serves no notice that is a link, another uid's or oversized, and counts each",
    "[exporter][unpublished]") {
    if (::geteuid() != 0) {
        WARN("SKIPPED: giving a file to another uid needs the test to run as root");
        return;
    }
    const temp_dir dir;
    const temp_dir elsewhere;
    // A live agent's notice, copied where each fault can be made of it while its lock is held.
    auto first = start_demo(dir, "pub-c", 120);
    // The first must hold the name before the twin starts.
    REQUIRE(first.read_line("lingering", std::chrono::seconds(60)));
    auto twin = start_twin(dir, "pub-c", 120);
    const pid_t twin_pid = twin.pid();
    const auto real = dir.path() / fmt::format("pub-c.{}.unpublished", twin_pid);
    REQUIRE(twin.read_line("lingering", std::chrono::seconds(60)));
    const std::string record = prom_it::read_file(real);
    REQUIRE_FALSE(record.empty());
    // The twin is stopped: only the crafted files below could be live notices.
    ::kill(twin_pid, SIGTERM);
    REQUIRE(twin.wait(std::chrono::seconds(30)) == 0);
    REQUIRE_FALSE(std::filesystem::exists(real));

    const auto held = [](const std::filesystem::path& p, const std::string& bytes) {
        prom_it::write_file(p, bytes);
        const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
        return fd;
    };
    const auto name = real.filename();
    std::vector<int> fds;
    // A link to a held notice elsewhere.
    fds.push_back(held(elsewhere.path() / name, record));
    std::filesystem::create_symlink(elsewhere.path() / name, dir.path() / name);
    // Another user's, under its own agent's name.
    const std::string theirs = "pub-theirs";
    auto foreign = record;
    foreign.replace(foreign.find("pub-c"), 5, theirs);
    const auto foreign_name = fmt::format("{}.{}.unpublished", theirs, twin_pid);
    fds.push_back(held(dir.path() / foreign_name, foreign));
    REQUIRE(::chown((dir.path() / foreign_name).c_str(), 54321, 54321) == 0);
    // Over 4 KiB.
    auto big = record;
    big.replace(big.find("pub-c"), 5, "pub-big");
    fds.push_back(held(dir.path() / fmt::format("pub-big.{}.unpublished", twin_pid),
                       big + std::string(4096, ' ')));

    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    std::string body;
    for (int i = 0; i < 6; ++i) {
        body = scrape(port);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    INFO(body);
    CHECK(value_of(body, "xtel_exporter_agents_unpublished ") == "0");
    CHECK(body.find("xtel_exporter_agent_unpublished{") == std::string::npos);
    CHECK(exporter_it::refused(body, "notice", "not_regular") == "1");
    CHECK(exporter_it::refused(body, "notice", "foreign_owner") == "1");
    CHECK(exporter_it::refused(body, "notice", "too_large") == "1");
    CHECK(exporter_it::read_errors(body) == 3);
    for (const int fd : fds) {
        ::close(fd);
    }
}

}  // namespace agent_state_test
