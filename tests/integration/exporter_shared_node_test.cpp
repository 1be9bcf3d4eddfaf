// xtel-exporter on a shared node: its directory (/dev/shm) is writable by every local user, so
// it serves only what the node's own agents wrote. With real xfer_demo agents, real node files
// and a real exporter process: another uid's file, a file whose lock another process holds, a
// writer it cannot see, faulty writers' oversized files, the series cap, files that churn or
// are rewritten, and a family two agents type differently; each refused or left out, logged
// and counted once, the real agents served meanwhile.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exporter_support.hpp"
#include "prometheus_support.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace exporter_shared_node_test {

using exporter_it::block;
using exporter_it::demo_options;
using exporter_it::read_errors;
using exporter_it::start_demo;
using exporter_it::start_exporter;
using exporter_it::transfers;
using exporter_it::tx_bytes;
using prom_it::child_process;
using prom_it::scrape;
using prom_it::scrape_until;
using prom_it::served_port;
using prom_it::value_of;
using xtel_test::count_of;
using xtel_test::temp_dir;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace nf = xtel::node::file;

namespace {

/// The uid the tests' attacker runs as: one no account of the machine has.
constexpr uid_t attacker_uid = 54321;
constexpr const char* setpriv = "/usr/bin/setpriv";
constexpr const char* unshare_path = "/usr/bin/unshare";

/// Whether the test can run a process as attacker_uid; says why not once if it cannot.
bool can_change_uid() {
    if (::geteuid() != 0 || ::access(setpriv, X_OK) != 0) {
        WARN(
            "SKIPPED: running a process as another uid needs the test to run as root, with "
            "setpriv (util-linux)");
        return false;
    }
    return true;
}

/// What runs a program as attacker_uid, without any group of this process.
std::vector<std::string> as_attacker() {
    return {setpriv, fmt::format("--reuid={}", attacker_uid),
            fmt::format("--regid={}", attacker_uid), "--clear-groups"};
}

/// Overwrites the writer pid of the node file at `path`.
void patch_writer_pid(const fs::path& path, pid_t pid) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const auto value = static_cast<std::uint32_t>(pid);
    const auto written = ::pwrite(fd, &value, sizeof value, offsetof(nf::file_header, writer_pid));
    ::close(fd);
    REQUIRE(written == sizeof value);
}

/// Waits until the node file at `path` has a payload published.
bool published(const fs::path& path, std::chrono::milliseconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        try {
            if (nf::reader(path).published() > 0) {
                return true;
            }
        } catch (const nf::format_error&) {
        }
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

/// A line of /proc/<pid>/status in bytes (VmHWM, VmRSS); 0 when absent.
std::uint64_t status_bytes(pid_t pid, std::string_view key) {
    const auto status = prom_it::read_file(fmt::format("/proc/{}/status", pid));
    const auto at = status.find(fmt::format("\n{}:", key));
    if (at == std::string::npos) {
        return 0;
    }
    return std::stoull(status.substr(at + key.size() + 2)) * 1024;
}

/// Waits for everything the exporter wrote so far and returns it.
std::string output_of(child_process& exporter) {
    exporter.read_line("no such line", 300ms);
    return exporter.output();
}

/// A snapshot of agent `agent` with family `family` of `type`, `n` series of one label.
xtel::metrics::snapshot snapshot_of(const std::string& agent,
                                    const std::string& family,
                                    xtel::metrics::metric_type type,
                                    std::size_t n) {
    xtel::metrics::snapshot s;
    s.labels = {{"agent_name", agent}};
    auto& f = s.families.emplace_back();
    f.spec.name = family;
    f.spec.help = "Made by the test.";
    f.spec.type = type;
    f.spec.label_names = {"i"};
    f.series.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        f.series[i].label_values = {std::to_string(i)};
        f.series[i].value = 7;
    }
    return s;
}

std::vector<std::byte> encoded(const xtel::metrics::snapshot& s) {
    std::vector<std::byte> out;
    xtel::metrics::encode_snapshot(s, out);
    return out;
}

/// A process of its own (forked from the test) that writes the node file `<dir>/<name>.metrics`
/// with a real writer, publishing `payload` every 50 ms, until this goes.
class forked_writer {
  public:
    forked_writer(const fs::path& dir, const std::string& name, std::vector<std::byte> payload) {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        REQUIRE(::pipe(stop_) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::close(ready[0]);
            ::close(stop_[1]);
            nf::writer w(dir, name);
            bool ok = w.publish(payload);
            (void)!::write(ready[1], ok ? "y" : "n", 1);
            for (;;) {
                pollfd p{stop_[0], POLLIN, 0};
                if (::poll(&p, 1, 50) != 0) {
                    ::_exit(0);  // the test let go: the writer ends as a crash would
                }
                ok = w.publish(payload) && ok;
            }
        }
        ::close(ready[1]);
        ::close(stop_[0]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        ::close(ready[0]);
        REQUIRE(c == 'y');
    }
    ~forked_writer() {
        ::close(stop_[1]);
        ::waitpid(pid_, nullptr, 0);
    }
    forked_writer(const forked_writer&) = delete;
    forked_writer& operator=(const forked_writer&) = delete;

    pid_t pid() const noexcept { return pid_; }

  private:
    pid_t pid_ = -1;
    int stop_[2] = {-1, -1};
};

/// A node file such as a faulty writer leaves: a valid header (written by this process, closed)
/// whose latest area is `payload` at offset 256, or, with `claimed`, an area of that many bytes
/// over a sparse file of that length (nothing written in it). Made under a temporary name and
/// renamed to `path`; false when that fails. Uses no test macro: threads call it.
bool craft_node_file(const fs::path& path,
                     const std::string& agent,
                     std::span<const std::byte> payload,
                     std::uint64_t claimed = 0) {
    nf::file_header h{};
    std::memcpy(h.magic, nf::magic, sizeof h.magic);
    h.version = nf::format_version;
    h.header_size = nf::header_size;
    h.created_us = 1;
    h.start_time_us = 1;
    h.writer_pid = static_cast<std::uint32_t>(::getpid());
    h.state = static_cast<std::uint32_t>(nf::writer_state::closed);
    std::strncpy(h.agent_name, agent.c_str(), sizeof h.agent_name - 1);
    h.generation = 2;
    const std::uint64_t length = claimed != 0 ? claimed : payload.size();
    h.areas[0] = {nf::header_size, length, length, 2, 1};
    const auto tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return false;
    }
    bool ok = ::pwrite(fd, &h, sizeof h, 0) == sizeof h;
    if (claimed != 0) {
        ok = ok && ::ftruncate(fd, static_cast<off_t>(nf::header_size + claimed)) == 0;
    } else {
        ok = ok && ::pwrite(fd, payload.data(), payload.size(), nf::header_size) ==
                       static_cast<ssize_t>(payload.size());
    }
    ::close(fd);
    std::error_code ec;
    fs::rename(tmp, path, ec);
    return ok && !ec;
}

}  // namespace

TEST_CASE("xtel-exporter shows every refusal reason at 0 before any file is refused",
          "[exporter]") {
    const temp_dir dir;
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto body = scrape(port);
    INFO(body);
    for (const auto& reason : exporter_it::refusal_reasons) {
        CAPTURE(reason);
        CHECK(read_errors(body, reason) == "0");
    }
    for (const char* reason : {"type_conflict", "reserved_name"}) {
        CHECK(value_of(body, fmt::format("xtel_exporter_families_left_out_total{{reason=\"{}\"}} ",
                                         reason)) == "0");
    }
}

TEST_CASE("xtel-exporter refuses a node file another uid wrote and renamed into its directory",
          "[exporter]") {
    if (!can_change_uid()) {
        return;
    }
    const temp_dir dir;
    const temp_dir attacker_dir;
    REQUIRE(::chmod(attacker_dir.path().c_str(), 01777) == 0);
    auto victim = start_demo(dir, "exp-victim", 120);
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = tx_bytes("exp-victim", victim.pid());
    const auto truth = std::to_string(transfers * block);
    REQUIRE(value_of(scrape_until(port,
                                  [&](const std::string& s) { return value_of(s, line) == truth; }),
                     line) == truth);

    // The attacker: a real agent of the victim's name, run as another uid in a directory of its
    // own, moving 16 times the bytes; its file given the victim's pid and renamed in.
    child_process attacker(
        demo_options(attacker_dir.path(), "exp-victim", 120, {}, as_attacker(), 16 * transfers));
    const auto forged = attacker_dir / "exp-victim.metrics";
    INFO(attacker.output());
    REQUIRE(published(forged));
    struct stat st {};
    REQUIRE(::stat(forged.c_str(), &st) == 0);
    REQUIRE(st.st_uid == attacker_uid);
    patch_writer_pid(forged, victim.pid());
    fs::rename(forged, dir / "aa-forged.metrics");

    // Several listings and refreshes later (the attacker's writer publishes all along).
    std::string body;
    for (int i = 0; i < 12; ++i) {
        std::this_thread::sleep_for(250ms);
        body = scrape(port);
    }
    INFO(body);
    CHECK(count_of(body, line) == 1);
    CHECK(value_of(body, line) == truth);
    CHECK(read_errors(body, "foreign_owner") == "1");
    CHECK(read_errors(body) == 1);
    CHECK(value_of(body, "xtel_exporter_agents ") == "2");
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said,
                   "aa-forged.metrics is not served (until it changes): foreign_owner: "
                   "owned by uid 54321") == 1);
}

TEST_CASE("xtel-exporter serves another uid's agents only when --allow-uid names it",
          "[exporter]") {
    if (!can_change_uid()) {
        return;
    }
    const temp_dir dir;
    REQUIRE(::chmod(dir.path().c_str(), 01777) == 0);
    child_process theirs(demo_options(dir.path(), "exp-theirs", 120, {}, as_attacker()));
    INFO(theirs.output());
    REQUIRE(published(dir / "exp-theirs_target.metrics"));
    REQUIRE(published(dir / "exp-theirs.metrics"));
    const auto line = tx_bytes("exp-theirs", theirs.pid());
    const auto truth = std::to_string(transfers * block);

    auto allowing =
        start_exporter(dir, {"--allow-uid", "nobody", "--allow-uid", std::to_string(attacker_uid)});
    const int allowing_port = served_port(allowing);
    REQUIRE(allowing_port > 0);
    const auto allowed = scrape_until(
        allowing_port, [&](const std::string& s) { return value_of(s, line) == truth; });
    CHECK(value_of(allowed, line) == truth);
    CHECK(read_errors(allowed) == 0);

    auto refusing = start_exporter(dir);
    const int refusing_port = served_port(refusing);
    REQUIRE(refusing_port > 0);
    const auto refused = scrape_until(
        refusing_port, [](const std::string& s) { return read_errors(s, "foreign_owner") == "2"; });
    INFO(refused);
    CHECK_FALSE(value_of(refused, line));
    CHECK(read_errors(refused, "foreign_owner") == "2");
    CHECK(value_of(refused, "xtel_exporter_agents ") == "0");
}

TEST_CASE("xtel-exporter refuses a live node file whose lock another writer process holds",
          "[exporter]") {
    const temp_dir dir;
    const temp_dir staging;
    auto victim = start_demo(dir, "exp-victim", 120);
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = tx_bytes("exp-victim", victim.pid());
    const auto truth = std::to_string(transfers * block);
    REQUIRE(value_of(scrape_until(port,
                                  [&](const std::string& s) { return value_of(s, line) == truth; }),
                     line) == truth);

    // A second real writer, of this uid, publishing a false count under an agent name of its
    // own; its header patched to name the victim's pid, so that its series would pass for the
    // victim process's, before it is renamed in.
    auto fake =
        snapshot_of("aa-forged", "agent_tx_bytes_total", xtel::metrics::metric_type::counter, 1);
    fake.families[0].spec.label_names = {"hostname"};
    fake.families[0].series[0].label_values = {"forged"};
    const forked_writer forger(staging.path(), "aa-forged", encoded(fake));
    patch_writer_pid(staging / "aa-forged.metrics", victim.pid());
    fs::rename(staging / "aa-forged.metrics", dir / "aa-forged.metrics");

    std::string body;
    for (int i = 0; i < 12; ++i) {
        std::this_thread::sleep_for(250ms);
        body = scrape(port);
    }
    INFO(body);
    CHECK(count_of(body, fmt::format(R"(agent_tx_bytes_total{{agent_name="exp-victim",pid="{}")",
                                     victim.pid())) == 1);
    CHECK(count_of(body, R"(agent_name="aa-forged")") == 0);
    CHECK(value_of(body, line) == truth);
    CHECK(read_errors(body, "writer_mismatch") == "1");
    CHECK(read_errors(body) == 1);
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said, fmt::format("aa-forged.metrics is not served: writer_mismatch: its lock "
                                     "is held by pid {}, not by the writer (pid {})",
                                     forger.pid(), victim.pid())) == 1);
}

TEST_CASE(
    "xtel-exporter in a PID namespace that cannot see the agents refuses their live files "
    "and says how to run it",
    "[exporter]") {
    if (::geteuid() != 0 || ::access(unshare_path, X_OK) != 0) {
        WARN(
            "SKIPPED: running the exporter in a PID namespace of its own needs root and "
            "unshare (util-linux)");
        return;
    }
    const temp_dir dir;
    auto demo = start_demo(dir, "exp-hidden", 120);
    REQUIRE(published(dir / "exp-hidden.metrics"));
    REQUIRE(published(dir / "exp-hidden_target.metrics"));
    auto exporter =
        start_exporter(dir.path(), {"--stale-ttl", "60"},
                       {unshare_path, "--pid", "--fork", "--mount-proc", "--kill-child"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    auto body = scrape_until(
        port, [](const std::string& s) { return read_errors(s, "writer_unverified") == "2"; });
    INFO(body);
    CHECK(read_errors(body, "writer_unverified") == "2");
    CHECK(value_of(body, "xtel_exporter_agents ") == "0");
    const auto said = output_of(exporter);
    CHECK(count_of(said, "exp-hidden.metrics is not served: writer_unverified") == 1);
    CHECK(count_of(said, "hostPID: true in Kubernetes") == 2);

    // A writer that is gone is no forgery: its files are served as a dead writer's.
    const auto line = tx_bytes("exp-hidden", demo.pid());
    ::kill(demo.pid(), SIGKILL);
    REQUIRE(demo.wait(10s));
    body = scrape_until(
        port, [&](const std::string& s) { return value_of(s, "xtel_exporter_agents ") == "2"; });
    CHECK(value_of(body, line) == std::to_string(transfers * block));
    CHECK(read_errors(body) == 2);
    // unshare ignores SIGTERM while it waits; killed, it has the exporter killed (--kill-child).
    ::kill(exporter.pid(), SIGKILL);
}

TEST_CASE(
    "xtel-exporter verifies a writer in a PID namespace of its own by the pid it sees "
    "there",
    "[exporter]") {
    if (::geteuid() != 0 || ::access(unshare_path, X_OK) != 0) {
        WARN(
            "SKIPPED: running an agent in a PID namespace of its own needs root and unshare "
            "(util-linux)");
        return;
    }
    const temp_dir dir;
    // As a container's agent: pid 1 in its namespace, another pid in the exporter's (with a
    // /proc of its namespace, which UCX's shared memory transport reads).
    child_process demo(
        demo_options(dir.path(), "exp-contained", 120, {},
                     {unshare_path, "--pid", "--fork", "--mount-proc", "--kill-child"}));
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = tx_bytes("exp-contained", 1);
    const auto truth = std::to_string(transfers * block);
    const auto body =
        scrape_until(port, [&](const std::string& s) { return value_of(s, line) == truth; });
    INFO(body << demo.output());
    CHECK(value_of(body, line) == truth);
    CHECK(read_errors(body) == 0);
    CHECK(value_of(body, "xtel_exporter_agents ") == "2");
    // unshare ignores SIGTERM while it waits; killed, it has the demo killed (--kill-child).
    ::kill(demo.pid(), SIGKILL);
}

TEST_CASE(
    "with faulty writers' oversized files beside real agents xtel-exporter answers every "
    "scrape within 1 s under 100 MB",
    "[exporter]") {
    const temp_dir dir;
    auto a = start_demo(dir, "exp-real-a", 300);
    auto b = start_demo(dir, "exp-real-b", 300);
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto truth = std::to_string(transfers * block);
    const auto a_line = tx_bytes("exp-real-a", a.pid());
    const auto b_line = tx_bytes("exp-real-b", b.pid());
    const auto real_served = [&](const std::string& s) {
        return value_of(s, a_line) == truth && value_of(s, b_line) == truth &&
               value_of(s, "xtel_exporter_agents ") == "4";
    };
    REQUIRE(real_served(scrape_until(port, real_served)));
    const auto before = status_bytes(exporter.pid(), "VmRSS");

    // A real writer's file of a million series (the file then over 128 MiB), and one made
    // compact, under the size limit, of 600,000: past the series cap.
    const auto million = encoded(
        snapshot_of("exp-million", "faulty_total", xtel::metrics::metric_type::counter, 1'000'000));
    auto huge = std::make_unique<nf::writer>(dir.path(), "exp-million");
    REQUIRE(huge->publish(million));
    REQUIRE(craft_node_file(dir / "exp-compact.metrics", "exp-compact",
                            encoded(snapshot_of("exp-compact", "faulty_total",
                                                xtel::metrics::metric_type::counter, 600'000))));
    REQUIRE(fs::file_size(dir / "exp-compact.metrics") < 32u << 20);
    // Eight sparse files whose header claims a 256 MiB payload, made again every second, by
    // deletion and by a rename over them in turn.
    std::atomic<bool> stop{false};
    std::atomic<int> failed{0};
    std::thread recreate([&] {
        for (int round = 0; !stop; ++round) {
            for (int k = 0; k < 8; ++k) {
                const auto path = dir / fmt::format("exp-sparse-{}.metrics", k);
                std::error_code ec;
                if (round % 2 == 1) {
                    fs::remove(path, ec);
                }
                failed += craft_node_file(path, "exp-sparse", {}, nf::max_payload_size) ? 0 : 1;
            }
            for (int i = 0; i < 10 && !stop; ++i) {
                std::this_thread::sleep_for(100ms);
            }
        }
    });

    std::vector<double> slow;
    int scrapes = 0;
    int whole = 0;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
        const auto start = std::chrono::steady_clock::now();
        const auto body = scrape(port);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        ++scrapes;
        whole += real_served(body) ? 1 : 0;
        if (took > 1s) {
            slow.push_back(took.count());
        }
        std::this_thread::sleep_for(250ms);
    }
    stop = true;
    recreate.join();
    CHECK(failed == 0);
    const auto peak = status_bytes(exporter.pid(), "VmHWM");
    const auto body = scrape(port);
    INFO(body);
    INFO("slow scrapes (s): " << fmt::format("{}", fmt::join(slow, ", ")));
    INFO("VmHWM " << peak << " bytes");
    CHECK(slow.empty());
    CHECK(whole == scrapes);
    CHECK(peak > 0);
    if (exporter_it::address_sanitized) {
        WARN(
            "SKIPPED: the memory checks, under AddressSanitizer (its shadow and quarantine "
            "are no release build's figures)");
    } else {
        CHECK(peak < 100'000'000);
    }
    // Each refused once, whatever was made again.
    CHECK(read_errors(body, "too_large") == "9");
    CHECK(read_errors(body, "series_limit") == "1");
    CHECK(read_errors(body) == 10);
    CHECK(count_of(output_of(exporter), "is not served") == 10);

    // The faulty files go; what the exporter holds comes back.
    huge.reset();
    for (const auto& e : fs::directory_iterator(dir.path())) {
        if (e.path().filename().string().starts_with("exp-sparse-") ||
            e.path().filename().string().starts_with("exp-million") ||
            e.path().filename().string().starts_with("exp-compact")) {
            fs::remove(e.path());
        }
    }
    for (int i = 0; i < 8; ++i) {
        std::this_thread::sleep_for(250ms);
        REQUIRE(real_served(scrape(port)));
    }
    const auto after = status_bytes(exporter.pid(), "VmRSS");
    INFO("VmRSS before " << before << " bytes, after " << after << " bytes");
    if (!exporter_it::address_sanitized) {
        CHECK(after < before + 16'000'000);
    }
}

TEST_CASE(
    "xtel-exporter refuses whole the file that would pass --max-series and serves it once "
    "there is room",
    "[exporter]") {
    const temp_dir dir;
    using xtel::metrics::metric_type;
    auto a = std::make_unique<nf::writer>(dir.path(), "exp-a");
    nf::writer b(dir.path(), "exp-b");
    nf::writer c(dir.path(), "exp-c");
    REQUIRE(a->publish(encoded(snapshot_of("exp-a", "a_total", metric_type::counter, 60))));
    REQUIRE(b.publish(encoded(snapshot_of("exp-b", "b_total", metric_type::counter, 60))));
    REQUIRE(c.publish(encoded(snapshot_of("exp-c", "c_total", metric_type::counter, 30))));
    auto exporter = start_exporter(dir, {"--max-series", "100"});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    std::string body;
    for (int i = 0; i < 8; ++i) {
        REQUIRE(b.publish(encoded(snapshot_of("exp-b", "b_total", metric_type::counter, 60))));
        std::this_thread::sleep_for(250ms);
        body = scrape(port);
    }
    INFO(body);
    CHECK(count_of(body, "a_total{") == 60);
    CHECK(count_of(body, "b_total{") == 0);
    CHECK(count_of(body, "c_total{") == 30);
    CHECK(read_errors(body, "series_limit") == "1");
    CHECK(value_of(body, "xtel_exporter_agents ") == "2");

    a.reset();
    fs::remove(dir / "exp-a.metrics");
    body = scrape_until(port, [](const std::string& s) { return count_of(s, "b_total{") == 60; });
    CHECK(count_of(body, "b_total{") == 60);
    CHECK(count_of(body, "c_total{") == 30);
    CHECK(read_errors(body, "series_limit") == "1");
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said,
                   "exp-b.metrics is not served: series_limit: its 60 time series would "
                   "take the node past --max-series 100") == 1);
    CHECK(count_of(said, "exp-b.metrics is served again") == 1);
}

TEST_CASE("a node file under another agent's name is refused as a name mismatch", "[exporter]") {
    const temp_dir dir;
    const temp_dir staging;
    auto victim = start_demo(dir, "exp-victim", 120);
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const auto line = tx_bytes("exp-victim", victim.pid());
    const auto truth = std::to_string(transfers * block);
    REQUIRE(value_of(scrape_until(port,
                                  [&](const std::string& s) { return value_of(s, line) == truth; }),
                     line) == truth);
    // A writer of this uid naming the victim in its header and payload, its file renamed in
    // under a name of its own: its series would sit beside the victim's, of another pid.
    auto fake =
        snapshot_of("exp-victim", "agent_tx_bytes_total", xtel::metrics::metric_type::counter, 1);
    fake.families[0].spec.label_names = {"hostname"};
    fake.families[0].series[0].label_values = {"forged"};
    const forked_writer forger(staging.path(), "exp-victim", encoded(fake));
    fs::rename(staging / "exp-victim.metrics", dir / "aa-forged.metrics");
    // And a file named as its header says, whose payload names the victim.
    nf::writer liar(dir.path(), "ab-liar");
    REQUIRE(liar.publish(encoded(fake)));

    const auto body = scrape_until(
        port, [](const std::string& s) { return read_errors(s, "name_mismatch") == "2"; });
    INFO(body);
    CHECK(read_errors(body, "name_mismatch") == "2");
    CHECK(count_of(body, R"(agent_tx_bytes_total{agent_name="exp-victim")") == 1);
    CHECK(value_of(body, line) == truth);
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said,
                   "aa-forged.metrics is not served (until it changes): name_mismatch: its "
                   "header names agent 'exp-victim', whose file would be "
                   "'exp-victim.metrics'") == 1);
    CHECK(count_of(said,
                   "ab-liar.metrics is not served (until it changes): name_mismatch: its "
                   "payload's agent_name 'exp-victim' is not the agent 'ab-liar' its "
                   "header names") == 1);
}

TEST_CASE("a node file deleted between the listing and its opening is neither logged nor counted",
          "[exporter]") {
    const temp_dir dir;
    const temp_dir staging;
    // Sixteen agents' files, each closed by its writer, to copy in and delete.
    std::vector<std::string> models;
    for (int k = 0; k < 16; ++k) {
        const auto name = fmt::format("exp-churn-{}", k);
        {
            nf::writer w(staging.path(), name);
            REQUIRE(w.publish(
                encoded(snapshot_of(name, "churn_total", xtel::metrics::metric_type::counter, 1))));
        }
        models.push_back(prom_it::read_file(staging / (name + ".metrics")));
    }
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    // Agents coming and going as fast as files can: each file renamed in (the watch wakes the
    // exporter), then deleted at once or a moment later.
    std::atomic<bool> stop{false};
    std::atomic<int> made{0};
    std::thread churn([&] {
        for (int i = 0; !stop; ++i) {
            const auto tmp = dir / fmt::format(".churn-{}.tmp", i % 16);
            const auto path = dir / fmt::format("exp-churn-{}.metrics", i % 16);
            prom_it::write_file(tmp, models[static_cast<std::size_t>(i % 16)]);
            std::error_code ec;
            fs::rename(tmp, path, ec);
            if (i % 3 == 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 7)));
            }
            fs::remove(path, ec);
            ++made;
        }
    });
    const auto until = std::chrono::steady_clock::now() + 6s;
    std::string body;
    while (std::chrono::steady_clock::now() < until) {
        body = scrape(port);
        std::this_thread::sleep_for(20ms);
    }
    stop = true;
    churn.join();
    body = scrape(port);
    INFO(made.load() << " files made and deleted");
    INFO(body);
    CHECK(made > 1000);
    CHECK(read_errors(body) == 0);
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said, "is not served") == 0);
}

TEST_CASE("a garbage node file rewritten every 100 ms is logged and counted once", "[exporter]") {
    const temp_dir dir;
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    std::string body;
    for (int i = 0; i < 30; ++i) {
        const auto garbage = fmt::format("garbage {} {}", i, std::string(300 + i, 'x'));
        if (i % 2 == 0) {
            prom_it::write_file(dir / "exp-garbage.metrics", garbage);  // in place
        } else {
            prom_it::write_file(dir / ".garbage.tmp", garbage);
            fs::rename(dir / ".garbage.tmp", dir / "exp-garbage.metrics");
        }
        std::this_thread::sleep_for(100ms);
        if (i % 3 == 0) {
            body = scrape(port);
        }
    }
    std::this_thread::sleep_for(300ms);
    body = scrape(port);
    INFO(body);
    CHECK(read_errors(body, "not_node_file") == "1");
    CHECK(read_errors(body) == 1);
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said, "exp-garbage.metrics is not served") == 1);
}

TEST_CASE("a link a FIFO and a directory named like node files are refused once and never opened",
          "[exporter]") {
    const temp_dir dir;
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    fs::create_symlink(dir / "fifo", dir / "exp-link.metrics");
    REQUIRE(::mkfifo((dir / "exp-fifo.metrics").c_str(), 0600) == 0);
    fs::create_directory(dir / "exp-dir.metrics");
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    std::string body;
    for (int i = 0; i < 6; ++i) {
        std::this_thread::sleep_for(250ms);
        body = scrape(port);
    }
    INFO(body);
    CHECK(read_errors(body, "not_regular") == "3");
    CHECK(read_errors(body) == 3);
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said,
                   "exp-link.metrics is not served (until it changes): not_regular: a "
                   "symbolic link") == 1);
    CHECK(count_of(said,
                   "exp-fifo.metrics is not served (until it changes): not_regular: a "
                   "FIFO") == 1);
    CHECK(count_of(said,
                   "exp-dir.metrics is not served (until it changes): not_regular: a "
                   "directory") == 1);
}

TEST_CASE(
    "of a family two agents type differently the first file's is served and the other's left "
    "out and reported once",
    "[exporter]") {
    const temp_dir dir;
    using xtel::metrics::metric_type;
    nf::writer first(dir.path(), "exp-first");
    nf::writer second(dir.path(), "exp-second");
    auto theirs = snapshot_of("exp-second", "shared_total", metric_type::gauge, 2);
    auto own = snapshot_of("exp-second", "second_only", metric_type::gauge, 1);
    // Sorted by name, as a snapshot's families are: "second_only" before "shared_total".
    theirs.families.insert(theirs.families.begin(), own.families[0]);
    REQUIRE(
        first.publish(encoded(snapshot_of("exp-first", "shared_total", metric_type::counter, 3))));
    REQUIRE(second.publish(encoded(theirs)));
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    std::string body;
    for (int i = 0; i < 8; ++i) {
        REQUIRE(second.publish(encoded(theirs)));
        std::this_thread::sleep_for(250ms);
        body = scrape(port);
    }
    INFO(body);
    CHECK(count_of(body, "# TYPE shared_total counter") == 1);
    CHECK(count_of(body, R"(shared_total{agent_name="exp-first")") == 3);
    CHECK(count_of(body, R"(shared_total{agent_name="exp-second")") == 0);
    CHECK(count_of(body, R"(second_only{agent_name="exp-second")") == 1);
    CHECK(value_of(body, R"(xtel_exporter_families_left_out_total{reason="type_conflict"} )") ==
          "1");
    CHECK(value_of(body, "xtel_exporter_agents ") == "2");
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said,
                   "exp-second.metrics: family shared_total is left out: it is a gauge here") == 1);
}

TEST_CASE("an agent's family of a name xtel-exporter serves itself is left out and reported once",
          "[exporter]") {
    const temp_dir dir;
    using xtel::metrics::metric_type;
    nf::writer forger(dir.path(), "exp-forger");
    // xtel-exporter's own counter as a gauge of 5 series: rendered before the exporter's own,
    // it stood in for it; of the same type, its series joined the exporter's family.
    auto fake =
        snapshot_of("exp-forger", "xtel_exporter_files_refused_total", metric_type::gauge, 5);
    REQUIRE(forger.publish(encoded(fake)));
    auto exporter = start_exporter(dir);
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    std::string body;
    for (int i = 0; i < 4; ++i) {
        REQUIRE(forger.publish(encoded(fake)));
        std::this_thread::sleep_for(250ms);
        body = scrape(port);
    }
    INFO(body);
    CHECK(count_of(body, "# TYPE xtel_exporter_files_refused_total counter") == 1);
    CHECK(count_of(body, "# TYPE xtel_exporter_files_refused_total gauge") == 0);
    CHECK(count_of(body, R"(xtel_exporter_files_refused_total{agent_name="exp-forger")") == 0);
    CHECK(value_of(body, R"(xtel_exporter_families_left_out_total{reason="reserved_name"} )") ==
          "1");
    CHECK(value_of(body, "xtel_exporter_agents ") == "1");
    const auto said = output_of(exporter);
    INFO(said);
    CHECK(count_of(said,
                   "exp-forger.metrics: family xtel_exporter_files_refused_total is left "
                   "out: xtel-exporter serves a family of that name itself") == 1);
}

}  // namespace exporter_shared_node_test
