// The node collector's rules for what it serves, with real node files written by real writers:
// the lock holder of a live file, the node's series cap, a family two files type differently,
// and one report per change of a file's state; and the two readers they rest on, of
// /proc/locks and of an encoded snapshot's series count.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "node/flock_holders.hpp"
#include "node/series_count.hpp"
#include "test_util.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/collector.hpp"
#include "xtel/node/file.hpp"

namespace node_collector_test {

namespace nf = xtel::node::file;
using xtel::metrics::family_snapshot;
using xtel::metrics::metric_type;
using xtel::metrics::snapshot;
using xtel::node::collector;
using xtel::node::refusal;
using xtel::node::detail::count_time_series;
using xtel::node::detail::flock_holders;

namespace {

/// A family of `type` named `name` with `n` series of one label (`i`); a histogram gets
/// `bounds` bounds and an exemplar per bucket.
family_snapshot family(std::string name, metric_type type, std::size_t n, std::size_t bounds = 0) {
    family_snapshot f;
    f.spec.name = std::move(name);
    f.spec.help = "A family of the test.";
    f.spec.type = type;
    f.spec.label_names = {"i"};
    for (std::size_t b = 0; b < bounds; ++b) {
        f.spec.bounds.push_back(static_cast<double>(10 * (b + 1)));
    }
    for (std::size_t k = 0; k < n; ++k) {
        xtel::metrics::series s;
        s.label_values = {std::to_string(k)};
        s.value = k;
        if (type == metric_type::histogram) {
            s.buckets.assign(bounds, 1);
            s.exemplars.resize(bounds + 1, {"request_id", "r", 5, 1});
            s.count = bounds + 1;
        }
        if (type == metric_type::histogram || type == metric_type::summary) {
            s.sum = 100;
        }
        f.series.push_back(std::move(s));
    }
    return f;
}

/// The payload of an agent named `agent` with `families` (sorted here by name).
std::vector<std::byte> payload_of(const std::string& agent, std::vector<family_snapshot> families) {
    snapshot s;
    s.labels = {{"agent_name", agent}};
    std::sort(families.begin(), families.end(),
              [](const auto& a, const auto& b) { return a.spec.name < b.spec.name; });
    s.families = std::move(families);
    std::vector<std::byte> out;
    xtel::metrics::encode_snapshot(s, out);
    return out;
}

collector::settings settings_of(const xtel_test::temp_dir& dir) {
    return {.dir = dir.path(), .stale_ttl = std::chrono::seconds(60), .program = "test"};
}

/// Scans and refreshes `c`; the agent_name label of each snapshot served, in order.
std::vector<std::string> served(collector& c) {
    c.scan();
    std::vector<std::string> out;
    for (const auto& s : c.refresh(collector::clock::now())) {
        out.push_back(s->labels.front().value);
    }
    return out;
}

/// The snapshot served for agent `agent`, or null.
std::shared_ptr<const snapshot> snapshot_of(collector& c, const std::string& agent) {
    c.scan();
    for (auto& s : c.refresh(collector::clock::now())) {
        if (s->labels.front().value == agent) {
            return s;
        }
    }
    return nullptr;
}

bool has_family(const snapshot& s, const std::string& name) {
    return std::any_of(s.families.begin(), s.families.end(),
                       [&](const auto& f) { return f.spec.name == name; });
}

/// How many of `lines` contain `part`.
std::size_t lines_with(const std::vector<std::string>& lines, const std::string& part) {
    return static_cast<std::size_t>(std::count_if(lines.begin(), lines.end(), [&](const auto& l) {
        return l.find(part) != std::string::npos;
    }));
}

/// A child process holding flock(LOCK_EX) on `path` until the pipe to it closes.
class lock_holder {
  public:
    explicit lock_holder(const std::filesystem::path& path) {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        REQUIRE(::pipe(release_) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            const int fd = ::open(path.c_str(), O_RDONLY);
            const bool locked = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
            const char c = locked ? 'y' : 'n';
            (void)!::write(ready[1], &c, 1);
            ::close(release_[1]);
            char b = 0;
            (void)!::read(release_[0], &b, 1);
            ::_exit(0);
        }
        ::close(ready[1]);
        ::close(release_[0]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        ::close(ready[0]);
        REQUIRE(c == 'y');
    }
    ~lock_holder() {
        ::close(release_[1]);
        ::waitpid(pid_, nullptr, 0);
    }
    lock_holder(const lock_holder&) = delete;
    lock_holder& operator=(const lock_holder&) = delete;

    pid_t pid() const noexcept { return pid_; }

  private:
    pid_t pid_ = -1;
    int release_[2] = {-1, -1};
};

}  // namespace

TEST_CASE("the exclusive flock holders of one device are read from /proc/locks lines",
          "[node_file][collector]") {
    const std::string text =
        "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 4343 fe:00:1234 0 EOF\n"
        "2: POSIX  ADVISORY  WRITE 5000 fe:00:2222 0 EOF\n"
        "3: OFDLCK ADVISORY  WRITE -1 fe:00:3333 0 EOF\n"
        "4: FLOCK  ADVISORY  READ 6000 fe:00:4444 0 EOF\n"
        "5: FLOCK  ADVISORY  WRITE 0 fe:00:5555 0 EOF\n"
        "6: FLOCK  ADVISORY  WRITE 7000 08:01:1234 0 EOF\n"
        "7: FLOCK  ADVISORY  WRITE 7100 00:1a2:99 0 EOF\n"
        "8: LEASE  ACTIVE    READ 3 fe:00:6666 0 EOF\n"
        "garbage\n";
    const auto one = flock_holders::parse(text, makedev(0xfe, 0));
    CHECK(one.holder(1234) == 4242);  // the holder, not the waiter after it
    CHECK_FALSE(one.holder(2222));    // a record lock
    CHECK_FALSE(one.holder(3333));
    CHECK_FALSE(one.holder(4444));  // shared: a reader testing the lock, never a writer
    CHECK_FALSE(one.holder(5555));  // a holder this PID namespace cannot see
    CHECK_FALSE(one.holder(6666));
    CHECK_FALSE(one.holder(99));  // another device
    const auto other = flock_holders::parse(text, makedev(0, 0x1a2));
    CHECK(other.holder(99) == 7100);
    CHECK_FALSE(other.holder(1234));
}

TEST_CASE("the process holding a file's flock is found in /proc/locks until it lets go",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const auto path = dir / "locked";
    std::ofstream(path) << "x";
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    pid_t pid = 0;
    {
        const lock_holder child(path);
        pid = child.pid();
        const auto table = flock_holders::read(st.st_dev);
        CHECK(table.readable());
        CHECK_FALSE(table.truncated());
        CHECK(table.holder(st.st_ino) == pid);
        CHECK(xtel::node::detail::innermost_pid(pid) == pid);
    }
    CHECK_FALSE(flock_holders::read(st.st_dev).holder(st.st_ino));
    CHECK_FALSE(xtel::node::detail::innermost_pid(pid));
}

TEST_CASE("a process's pid in its own PID namespace is read through NSpid",
          "[node_file][collector]") {
    if (::geteuid() != 0) {
        WARN("SKIPPED: making a PID namespace needs the test to run as root");
        return;
    }
    int to_parent[2];
    int release[2];
    REQUIRE(::pipe(to_parent) == 0);
    REQUIRE(::pipe(release) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The next child is pid 1 of a namespace of its own; this one tells its pid here.
        if (::unshare(CLONE_NEWPID) != 0) {
            ::_exit(1);
        }
        const pid_t inner = ::fork();
        if (inner == 0) {
            ::close(release[1]);
            char b = 0;
            (void)!::read(release[0], &b, 1);
            ::_exit(0);
        }
        ::close(release[1]);  // the inner child's read ends when the parent's end closes
        (void)!::write(to_parent[1], &inner, sizeof inner);
        ::waitpid(inner, nullptr, 0);
        ::_exit(0);
    }
    ::close(to_parent[1]);
    ::close(release[0]);
    pid_t inner = 0;
    const bool told = ::read(to_parent[0], &inner, sizeof inner) == sizeof inner;
    const auto seen = told ? xtel::node::detail::innermost_pid(inner) : std::nullopt;
    ::close(release[1]);
    ::waitpid(child, nullptr, 0);
    REQUIRE(told);
    CHECK(inner != 1);
    CHECK(seen == 1);
}

TEST_CASE("the time series of an encoded snapshot are counted as Prometheus counts them",
          "[node_file][collector]") {
    const auto payload = payload_of(
        "a", {family("c_total", metric_type::counter, 3), family("g", metric_type::gauge, 2),
              family("h_seconds", metric_type::histogram, 2, 4),
              family("s_seconds", metric_type::summary, 1)});
    // 3 + 2 + 2 x (4 buckets, +Inf, _sum, _count) + 1 x (_sum, _count)
    CHECK(count_time_series(payload, 1000) == 21);
    CHECK(count_time_series(payload, 21) == 21);
    // Past the cap it stops: what it had counted when it passed it.
    const auto stopped = count_time_series(payload, 10);
    REQUIRE(stopped);
    CHECK(*stopped > 10);
    CHECK(count_time_series(payload_of("a", {}), 0) == 0);
}

TEST_CASE("a series count is refused for every truncation and for bytes after the end",
          "[node_file][collector]") {
    auto payload = payload_of("a", {family("c_total", metric_type::counter, 3),
                                    family("h_seconds", metric_type::histogram, 2, 4)});
    for (std::size_t n = 0; n < payload.size(); ++n) {
        CAPTURE(n);
        CHECK_FALSE(count_time_series(std::span(payload).first(n), 1000));
    }
    payload.push_back(std::byte{0});
    CHECK_FALSE(count_time_series(payload, 1000));
    payload.pop_back();
    payload[4] = std::byte{4};  // version 4, which this reader does not know
    CHECK_FALSE(count_time_series(payload, 1000));
}

TEST_CASE("version 1 and 2 payloads are counted as their version 3 encoding is",
          "[node_file][collector]") {
    // The same agent's payload before exemplars had ids, before native buckets and now
    // (tests/golden): the same series, whatever each exemplar and family takes.
    const auto read = [](std::string_view name) {
        const auto text = xtel_test::read_file(std::filesystem::path(XTEL_SOURCE_DIR) / "tests" /
                                               "golden" / std::string(name));
        std::vector<std::byte> out(text.size());
        std::memcpy(out.data(), text.data(), text.size());
        return out;
    };
    const auto v1 = read("node_payload_v1.bin");
    const auto v2 = read("node_payload_v2.bin");
    const auto v3 = read("node_payload.bin");
    REQUIRE(v1.size() > 8);
    REQUIRE(v1[4] == std::byte{1});
    REQUIRE(v2[4] == std::byte{2});
    REQUIRE(v3[4] == std::byte{3});
    const auto counted = count_time_series(v1, 1'000'000);
    REQUIRE(counted);
    CHECK(*counted > 0);
    CHECK(counted == count_time_series(v2, 1'000'000));
    CHECK(counted == count_time_series(v3, 1'000'000));
}

TEST_CASE("a native-only histogram's series is counted as its +Inf bucket, sum and count",
          "[node_file][collector]") {
    // Text shows a native-only histogram as its classic form, +Inf alone: 3 lines, whatever
    // its native buckets (protobuf's one series is fewer).
    snapshot s;
    family_snapshot f;
    f.spec = {.name = "lat_seconds",
              .type = metric_type::histogram,
              .label_names = {"peer"},
              .native = true,
              .native_schema = 3};
    for (const char* peer : {"a", "b"}) {
        xtel::metrics::series x;
        x.label_values = {peer};
        x.native_schema = 3;
        x.native_first = -5;
        x.native_buckets = {1, 0, 4};
        x.zero_count = 2;
        x.count = 7;
        f.series.push_back(x);
    }
    s.families = {f};
    std::vector<std::byte> payload;
    xtel::metrics::encode_snapshot(s, payload);
    CHECK(count_time_series(payload, 1000) == 6);
    for (std::size_t n = 0; n < payload.size(); ++n) {
        CAPTURE(n);
        CHECK_FALSE(count_time_series(std::span(payload).first(n), 1000));
    }
}

TEST_CASE("the collector serves a live file whose lock its header's writer holds",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "own");
    REQUIRE(w.publish(payload_of("own", {family("c_total", metric_type::counter, 2)})));
    collector c(settings_of(dir));
    CHECK(served(c) == std::vector<std::string>{"own"});
    CHECK(c.read_errors_total() == 0);
}

TEST_CASE(
    "the collector refuses a live file whose lock another process holds as writer_mismatch once",
    "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::temp_dir staging;
    const xtel_test::log_capture logs;
    // A writer of this process, whose header is made to name another process; renamed in
    // once patched, so that no reading sees the true pid.
    nf::writer w(staging.path(), "forged");
    REQUIRE(w.publish(payload_of("victim", {family("c_total", metric_type::counter, 2)})));
    const pid_t other = ::getppid();
    {
        std::fstream f(w.path(), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(offsetof(nf::file_header, writer_pid));
        const auto pid = static_cast<std::uint32_t>(other);
        f.write(reinterpret_cast<const char*>(&pid), sizeof pid);
    }
    std::filesystem::rename(w.path(), dir / "forged.metrics");
    collector c(settings_of(dir));
    for (int i = 0; i < 5; ++i) {
        CHECK(served(c).empty());
        REQUIRE(w.publish(payload_of("victim", {family("c_total", metric_type::counter, 2)})));
    }
    CHECK(c.read_errors(refusal::writer_mismatch) == 1);
    CHECK(c.read_errors_total() == 1);
    const auto warnings = logs.at(xtel::log_level::warning);
    INFO(fmt::format("{}", fmt::join(warnings, "\n")));
    CHECK(lines_with(warnings, "forged.metrics is not served: writer_mismatch") == 1);
    CHECK(lines_with(warnings, fmt::format("held by pid {}", ::getpid())) == 1);
    CHECK(lines_with(warnings, fmt::format("writer (pid {})", other)) == 1);
}

TEST_CASE("the collector serves a closed file whatever pid its header names",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    {
        nf::writer w(dir.path(), "done");
        REQUIRE(w.publish(payload_of("done", {family("c_total", metric_type::counter, 2)})));
    }
    // A lock another process takes on a closed file makes it no live writer's.
    const lock_holder squatter(dir / "done.metrics");
    collector c(settings_of(dir));
    CHECK(served(c) == std::vector<std::string>{"done"});
    CHECK(served(c) == std::vector<std::string>{"done"});
    CHECK(c.read_errors_total() == 0);
}

/// Sets the modification time of the file `name` of `dir` to `ago` before now: when a closed
/// file was closed, as a collector reads it.
void changed_ago(const xtel_test::temp_dir& dir,
                 const std::string& name,
                 std::chrono::seconds ago) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch() - ago)
                        .count();
    const timespec when{static_cast<time_t>(ns / 1'000'000'000),
                        static_cast<long>(ns % 1'000'000'000)};
    const timespec times[2] = {when, when};
    REQUIRE(::utimensat(AT_FDCWD, (dir / (name + ".metrics")).c_str(), times, 0) == 0);
}

TEST_CASE("an agent that stopped longer than the stale time ago is not served by a new collector",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    for (const char* name : {"long-gone", "just-stopped"}) {
        nf::writer w(dir.path(), name);
        REQUIRE(w.publish(payload_of(name, {family("c_total", metric_type::counter, 2)})));
    }
    // Closed 9 minutes ago and 30 s ago, as the files' times say.
    changed_ago(dir, "long-gone", std::chrono::minutes(9));
    changed_ago(dir, "just-stopped", std::chrono::seconds(30));
    collector c(settings_of(dir));  // a stale time of 60 s
    CHECK(served(c) == std::vector<std::string>{"just-stopped"});
    CHECK(served(c) == std::vector<std::string>{"just-stopped"});
    // The stale time counts from the stop, not from when this collector first saw it.
    c.scan();
    const auto agents = c.refresh_agents(collector::clock::now() + std::chrono::seconds(31));
    CHECK(agents.empty());
}

TEST_CASE(
    "the collector refuses whole the file whose series would pass the cap and serves "
    "those after it that fit",
    "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    auto a = std::make_unique<nf::writer>(dir.path(), "a");
    nf::writer b(dir.path(), "b");
    nf::writer c3(dir.path(), "c");
    REQUIRE(a->publish(payload_of("a", {family("x_total", metric_type::counter, 60)})));
    REQUIRE(b.publish(payload_of("b", {family("x_total", metric_type::counter, 60)})));
    REQUIRE(c3.publish(payload_of("c", {family("h_seconds", metric_type::histogram, 5, 3)})));
    auto s = settings_of(dir);
    s.max_series = 100;
    collector c(s);
    for (int i = 0; i < 4; ++i) {
        // a: 60, b: 60 would make 120, c: 5 x 6 = 30 makes 90.
        CHECK(served(c) == std::vector<std::string>{"a", "c"});
        REQUIRE(b.publish(payload_of("b", {family("x_total", metric_type::counter, 60)})));
    }
    CHECK(c.read_errors(refusal::series_limit) == 1);
    CHECK(lines_with(logs.at(xtel::log_level::warning),
                     "b.metrics is not served: series_limit: its 60 time series") == 1);
    // a goes: b fits.
    a.reset();
    std::filesystem::remove(dir / "a.metrics");
    CHECK(served(c) == std::vector<std::string>{"b", "c"});
    CHECK(lines_with(logs.at(xtel::log_level::info), "b.metrics is served again") == 1);
    CHECK(c.read_errors(refusal::series_limit) == 1);
}

TEST_CASE("the collector leaves out the family a later file types differently and reports it once",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer a(dir.path(), "a");
    nf::writer b(dir.path(), "b");
    REQUIRE(a.publish(payload_of("a", {family("shared_total", metric_type::counter, 1),
                                       family("a_only", metric_type::gauge, 1)})));
    const auto b_payload = payload_of("b", {family("shared_total", metric_type::gauge, 1),
                                            family("b_only", metric_type::gauge, 1)});
    REQUIRE(b.publish(b_payload));
    collector c(settings_of(dir));
    for (int i = 0; i < 3; ++i) {
        const auto sa = snapshot_of(c, "a");
        const auto sb = snapshot_of(c, "b");
        REQUIRE(sa);
        REQUIRE(sb);
        CHECK(has_family(*sa, "shared_total"));
        CHECK_FALSE(has_family(*sb, "shared_total"));
        CHECK(has_family(*sb, "b_only"));
        REQUIRE(b.publish(b_payload));  // a new payload of the same: not a new conflict
    }
    CHECK(c.families_left_out(collector::left_out::type_conflict) == 1);
    CHECK(c.families_left_out(collector::left_out::reserved_name) == 0);
    const auto warnings = logs.at(xtel::log_level::warning);
    INFO(fmt::format("{}", fmt::join(warnings, "\n")));
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0],
               Catch::Contains("b.metrics: family shared_total is left out: it is a gauge "
                               "here") &&
                   Catch::Contains("a.metrics (whose name sorts first) serves it as "
                                   "a counter"));
    CHECK(c.read_errors_total() == 0);
}

TEST_CASE("the collector leaves out an agent's family that the program serves itself",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer a(dir.path(), "a");
    // Of the exporter's own name and type: it would add its series to the exporter's family,
    // or, rendered first, stand in for it.
    REQUIRE(a.publish(payload_of("a", {family("xtel_exporter_agents", metric_type::gauge, 1),
                                       family("a_only", metric_type::gauge, 1)})));
    auto settings = settings_of(dir);
    settings.reserved_families = {"xtel_exporter_agents"};
    collector c(settings);
    for (int i = 0; i < 2; ++i) {
        const auto sa = snapshot_of(c, "a");
        REQUIRE(sa);
        CHECK_FALSE(has_family(*sa, "xtel_exporter_agents"));
        CHECK(has_family(*sa, "a_only"));
    }
    CHECK(c.families_left_out(collector::left_out::reserved_name) == 1);
    CHECK(c.families_left_out(collector::left_out::type_conflict) == 0);
    const auto warnings = logs.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("a.metrics: family xtel_exporter_agents is left out: "
                                            "test serves a family of that name itself"));
}

TEST_CASE("a garbage file rewritten again and again is reported once per change of its fault",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    collector c(settings_of(dir));
    const auto path = dir / "g.metrics";
    for (int i = 0; i < 20; ++i) {
        if (i % 2 == 0) {
            std::ofstream(path) << fmt::format("garbage {}\n{}", i, std::string(300 + i, 'x'));
        } else {
            // Made anew under another name and renamed over it, as a writer does.
            std::ofstream(dir / ".g.tmp") << fmt::format("garbage {}", i);
            std::filesystem::rename(dir / ".g.tmp", path);
        }
        CHECK(served(c).empty());
        if (i == 9) {
            std::filesystem::remove(path);  // gone for a listing, then back with the same fault
            CHECK(served(c).empty());
        }
    }
    CHECK(c.read_errors(refusal::not_node_file) == 1);
    // Another fault is another state.
    std::filesystem::remove(path);
    ::mkfifo(path.c_str(), 0600);
    CHECK(served(c).empty());
    CHECK(c.read_errors(refusal::not_regular) == 1);
    CHECK(c.read_errors_total() == 2);
    const auto warnings = logs.at(xtel::log_level::warning);
    INFO(fmt::format("{}", fmt::join(warnings, "\n")));
    CHECK(warnings.size() == 2);
}

TEST_CASE("the collector refuses a file larger than its limit without reading it",
          "[node_file][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer w(dir.path(), "big");
    REQUIRE(w.publish(payload_of("big", {family("c_total", metric_type::counter, 2)})));
    auto s = settings_of(dir);
    s.max_file_bytes = std::filesystem::file_size(w.path()) - 1;
    collector c(s);
    CHECK(served(c).empty());
    CHECK(served(c).empty());
    CHECK(c.read_errors(refusal::too_large) == 1);
    CHECK(c.read_errors_total() == 1);
}

TEST_CASE("the collector refuses another uid's file unopened and serves it once allowed",
          "[node_file][collector]") {
    if (::geteuid() != 0) {
        WARN("SKIPPED: giving a file to another uid needs the test to run as root");
        return;
    }
    constexpr uid_t other = 54321;
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer w(dir.path(), "theirs");
    REQUIRE(w.publish(payload_of("theirs", {family("c_total", metric_type::counter, 2)})));
    REQUIRE(::chown(w.path().c_str(), other, other) == 0);
    collector refusing(settings_of(dir));
    CHECK(served(refusing).empty());
    REQUIRE(w.publish(payload_of("theirs", {family("c_total", metric_type::counter, 3)})));
    CHECK(served(refusing).empty());
    CHECK(refusing.read_errors(refusal::foreign_owner) == 1);
    CHECK(lines_with(logs.at(xtel::log_level::warning),
                     "theirs.metrics is not served (until it changes): foreign_owner: owned by "
                     "uid 54321") == 1);

    auto s = settings_of(dir);
    s.allowed_uids = {other};
    collector allowing(s);
    CHECK(served(allowing) == std::vector<std::string>{"theirs"});
    CHECK(allowing.read_errors_total() == 0);
}

TEST_CASE("the collector leaves out a family whose OpenMetrics names another file's family takes",
          "[node_file][collector][surface]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer a(dir.path(), "a");
    nf::writer b(dir.path(), "b");
    // Each file is valid alone; together an OpenMetrics body holds the histogram lat, which
    // claims lat_created, and could not show the gauge lat_created.
    REQUIRE(a.publish(payload_of("a", {family("lat", metric_type::histogram, 1, 2)})));
    REQUIRE(b.publish(payload_of("b", {family("lat_created", metric_type::gauge, 1),
                                       family("b_only", metric_type::gauge, 1)})));
    collector c(settings_of(dir));
    for (int i = 0; i < 2; ++i) {
        const auto sa = snapshot_of(c, "a");
        const auto sb = snapshot_of(c, "b");
        REQUIRE(sa);
        REQUIRE(sb);
        CHECK(has_family(*sa, "lat"));
        CHECK_FALSE(has_family(*sb, "lat_created"));
        CHECK(has_family(*sb, "b_only"));
    }
    CHECK(c.families_left_out(collector::left_out::name_clash) == 1);
    CHECK(c.families_left_out(collector::left_out::type_conflict) == 0);
    const auto warnings = logs.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("b.metrics: family lat_created is left out: in "
                                            "OpenMetrics"));
}

TEST_CASE("the collector serves only the families its globs choose, logging each other once",
          "[node_file][collector][surface]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer a(dir.path(), "a");
    REQUIRE(a.publish(payload_of("a", {family("xtel_transfer_bytes_total", metric_type::counter, 1),
                                       family("xtel_errors_total", metric_type::counter, 1),
                                       family("agent_tx_bytes_total", metric_type::counter, 1)})));
    auto settings = settings_of(dir);
    settings.families = {"xtel_transfer_*", "xtel_errors_total"};
    collector c(settings);
    for (int i = 0; i < 2; ++i) {
        const auto sa = snapshot_of(c, "a");
        REQUIRE(sa);
        CHECK(has_family(*sa, "xtel_transfer_bytes_total"));
        CHECK(has_family(*sa, "xtel_errors_total"));
        CHECK_FALSE(has_family(*sa, "agent_tx_bytes_total"));
    }
    CHECK(lines_with(logs.at(xtel::log_level::info),
                     "family agent_tx_bytes_total is not served: --metrics leaves it out") == 1);
    // The operator's choice is not a fault: nothing counted as left out.
    for (std::size_t r = 0; r < collector::left_out_count; ++r) {
        CHECK(c.families_left_out(static_cast<collector::left_out>(r)) == 0);
    }
}

TEST_CASE("a family --metrics leaves out takes no OpenMetrics names from those it serves",
          "[node_file][collector][surface]") {
    const xtel_test::temp_dir dir;
    nf::writer a(dir.path(), "a");
    nf::writer b(dir.path(), "b");
    REQUIRE(a.publish(payload_of("a", {family("lat", metric_type::histogram, 1, 2)})));
    REQUIRE(b.publish(payload_of("b", {family("lat_created", metric_type::gauge, 1)})));
    auto settings = settings_of(dir);
    settings.families = {"lat_created"};  // lat, which would claim lat_created, is not served
    collector c(settings);
    const auto sb = snapshot_of(c, "b");
    REQUIRE(sb);
    CHECK(has_family(*sb, "lat_created"));
    CHECK(c.families_left_out(collector::left_out::name_clash) == 0);
}

}  // namespace node_collector_test
