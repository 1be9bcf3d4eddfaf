// The unpublished notice an agent leaves when it cannot publish its node file: its record, read
// and written (docs/node-format.md, "The unpublished notice"), the writer's life, and what the
// collector makes of notices in a shared directory: live ones listed, dead ones ignored and left,
// and the node files' trust rules applied to them.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/back_end.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/node/collector.hpp"
#include "xtel/node/file.hpp"
#include "xtel/node/notice.hpp"

namespace node_notice_test {

using xtel::node::collector;
using xtel::node::format_notice;
using xtel::node::notice;
using xtel::node::notice_error;
using xtel::node::notice_writer;
using xtel::node::parse_notice;
using xtel::node::refusal;

namespace {

notice sample_notice(std::uint32_t pid = 4242) {
    notice n;
    n.agent_name = "rank0";
    n.pid = pid;
    n.node_file = "/dev/shm/rank0.metrics";
    n.reason = "name_taken";
    n.error = "node file /dev/shm/rank0.metrics: in use by the live writer process 4100";
    return n;
}

collector::settings settings_of(const xtel_test::temp_dir& dir) {
    return {.dir = dir.path(), .stale_ttl = std::chrono::seconds(60), .program = "test"};
}

/// Scans and refreshes `c`; the live notices it lists.
std::vector<notice> unpublished(collector& c) {
    c.scan();
    (void)c.refresh(collector::clock::now());
    return c.unpublished();
}

/// `bytes` written at `path`, and a descriptor holding flock(LOCK_EX) on it, as a live agent
/// holds its notice.
struct held_file {
    int fd = -1;
    held_file(const std::filesystem::path& path, const std::string& bytes) {
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
        REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    }
    ~held_file() { ::close(fd); }
    held_file(const held_file&) = delete;
    held_file& operator=(const held_file&) = delete;
};

}  // namespace

TEST_CASE("a notice's record is six lines that parse back to the same record and bytes",
          "[node_file][notice]") {
    const auto n = sample_notice();
    const auto text = format_notice(n);
    CHECK(text ==
          "xtel-unpublished 1\nagent_name rank0\npid 4242\nnode_file /dev/shm/rank0.metrics\n"
          "reason name_taken\nerror node file /dev/shm/rank0.metrics: in use by the live writer "
          "process 4100\n");
    CHECK(parse_notice(text) == n);
}

TEST_CASE("a notice escapes backslashes and bytes outside printable ASCII, one way each",
          "[node_file][notice]") {
    auto n = sample_notice();
    n.agent_name = "caf\xc3\xa9\\x";
    n.error = "two\nlines";
    const auto text = format_notice(n);
    CHECK(text.find("agent_name caf\\xc3\\xa9\\\\x\n") != std::string::npos);
    CHECK(text.find("error two\\x0alines\n") != std::string::npos);
    CHECK(parse_notice(text) == n);
    // Another spelling of the same bytes is not the notice's encoding.
    auto upper = text;
    upper.replace(upper.find("\\xc3"), 4, "\\xC3");
    CHECK_THROWS_AS(parse_notice(upper), notice_error);
    auto needless = format_notice(sample_notice());
    needless.replace(needless.find("rank0"), 1, "\\x72");
    CHECK_THROWS_AS(parse_notice(needless), notice_error);
}

TEST_CASE("a notice with a long error text is cut to 4096 bytes and still parses",
          "[node_file][notice]") {
    auto n = sample_notice();
    n.node_file = std::string(3000, 'p');
    n.error = std::string(5000, '\x01');
    const auto text = format_notice(n);
    CHECK(text.size() <= xtel::node::max_notice_bytes);
    const auto back = parse_notice(text);
    CHECK(back.agent_name == n.agent_name);
    CHECK(back.node_file == std::string(1536, 'p'));
    CHECK_FALSE(back.error.empty());
    CHECK(back.error.size() < 1000);  // 4 bytes per escaped byte
    CHECK(std::all_of(back.error.begin(), back.error.end(), [](char c) { return c == '\x01'; }));
}

TEST_CASE("a notice is refused for another version, a bad pid or reason, or a missing line",
          "[node_file][notice]") {
    const auto good = format_notice(sample_notice());
    const auto with = [&](std::string_view from, std::string_view to) {
        auto t = good;
        t.replace(t.find(from), from.size(), to);
        return t;
    };
    CHECK_THROWS_AS(parse_notice(with("xtel-unpublished 1", "xtel-unpublished 2")), notice_error);
    CHECK_THROWS_AS(parse_notice(with("pid 4242", "pid 0")), notice_error);
    CHECK_THROWS_AS(parse_notice(with("pid 4242", "pid 04242")), notice_error);
    CHECK_THROWS_AS(parse_notice(with("pid 4242", "pid 2147483648")), notice_error);
    CHECK_THROWS_AS(parse_notice(with("reason name_taken", "reason Name")), notice_error);
    CHECK_THROWS_AS(parse_notice(with("agent_name rank0", "agent_name ")), notice_error);
    CHECK_THROWS_AS(parse_notice(with("pid 4242\n", "")), notice_error);
    CHECK_THROWS_AS(parse_notice(good + "x"), notice_error);
    CHECK_THROWS_AS(parse_notice(good.substr(0, good.size() - 1)), notice_error);
    CHECK_THROWS_AS(parse_notice(std::string(4097, 'x')), notice_error);
}

TEST_CASE("a notice writer makes its file 0600 and locked, and removes it when it goes",
          "[node_file][notice]") {
    const xtel_test::temp_dir dir;
    const auto n = sample_notice(static_cast<std::uint32_t>(::getpid()));
    std::filesystem::path path;
    {
        const notice_writer w(dir.path(), n);
        path = w.path();
        CHECK(path == dir.path() / fmt::format("rank0.{}.unpublished", ::getpid()));
        struct stat st {};
        REQUIRE(::lstat(path.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 0600);
        CHECK(xtel_test::read_file(path) == format_notice(n));
        const int fd = ::open(path.c_str(), O_RDONLY);
        CHECK(::flock(fd, LOCK_SH | LOCK_NB) != 0);  // the writer's lock
        ::close(fd);
        // Nothing else is left in the directory (no temporary file).
        CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                            std::filesystem::directory_iterator()) == 1);
    }
    CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a notice writer leaves another file at its name alone and says so",
          "[node_file][notice]") {
    const xtel_test::temp_dir dir;
    const auto n = sample_notice(static_cast<std::uint32_t>(::getpid()));
    const auto path = dir.path() / xtel::node::notice_file_name(n.agent_name, n.pid);
    const held_file live(path, "someone's");
    CHECK_THROWS_AS(notice_writer(dir.path(), n), xtel::exporter_error);
    CHECK(xtel_test::read_file(path) == "someone's");
}

TEST_CASE("a second node exporter of a live agent's name leaves a name_taken notice until it stops",
          "[node_file][notice]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    const xtel::config cfg;
    const xtel::exporter_context ctx{cfg, "twin"};
    const xtel::node_settings s{dir.path()};
    const auto model = std::make_shared<xtel::metrics::agent_metrics>(
        "twin", xtel::metrics::agent_metrics_settings{});
    xtel::node_exporter first({ctx, model}, s);
    REQUIRE_FALSE(first.disabled());
    const auto notice_path =
        dir.path() / xtel::node::notice_file_name("twin", static_cast<std::uint32_t>(::getpid()));
    {
        xtel::node_exporter second({ctx, model}, s);
        CHECK(second.disabled());
        REQUIRE(std::filesystem::exists(notice_path));
        const auto n = parse_notice(xtel_test::read_file(notice_path));
        CHECK(n.reason == "name_taken");
        CHECK(n.node_file == (dir.path() / "twin.metrics").string());
        CHECK(n.error.find("in use by the live writer process") != std::string::npos);
        // The agent's error names the node file with its suffix.
        const auto errors = logs.at(xtel::log_level::error);
        CHECK(std::count_if(errors.begin(), errors.end(), [&](const std::string& l) {
                  return l.find((dir.path() / "twin.metrics").string() + ":") != std::string::npos;
              }) == 1);
        second.on_stop();
        CHECK_FALSE(std::filesystem::exists(notice_path));
    }
    first.on_stop();
}

TEST_CASE("the back end counts every event a disabled node exporter would have been handed",
          "[node_file][notice]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    const xtel::config plain;
    const xtel::node_exporter first({{plain, "twin"},
                                     std::make_shared<xtel::metrics::agent_metrics>(
                                         "twin", xtel::metrics::agent_metrics_settings{})},
                                    xtel::node_settings{dir.path()});
    REQUIRE_FALSE(first.disabled());

    // A second agent of the name, as a pipeline builds it: its node file is taken.
    const auto cfg = xtel_test::enabled_config({"node"}, dir.path().string());
    const xtel::label_table labels;
    xtel::back_end<xtel::node_exporter> be({cfg, "twin"}, labels, 64);
    REQUIRE(be.get<xtel::node_exporter>().disabled());
    xtel::transfer_record timed;  // 4 events: bytes, requests, xfer and post time
    timed.bytes = 4096;
    timed.requests = 1;
    xtel::transfer_record untimed = timed;  // 2 events
    untimed.timed = false;
    xtel::transfer_record failed = timed;  // none
    failed.attrs.status = xtel::transfer_status::error;
    xtel::transfer_record notified = timed;  // none: another agent's transfer
    notified.notified = true;
    const std::vector records{timed, untimed, failed, notified};
    be.take(std::span<const xtel::transfer_record>(records));
    xtel::event custom;
    custom.name = "depth";
    custom.cat = xtel::category::custom;
    const std::vector events{custom, custom, custom};
    be.take(std::span<const xtel::event>(events));
    be.end_round(0);
    CHECK(be.events_lost(0) == 4 + 2 + 3);
    CHECK(be.stats().events_lost == 9);
    CHECK(be.stats().exporters_disabled == 1);
    be.take(std::span<const xtel::transfer_record>(records));
    be.end_round(0);
    CHECK(be.events_lost(0) == 15);
}

TEST_CASE("the collector lists a live notice, logs it once, and ignores it once its agent is gone",
          "[node_file][notice][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    collector c(settings_of(dir));
    const auto n = sample_notice();
    const auto path = dir.path() / "rank0.4242.unpublished";
    {
        const held_file live(path, format_notice(n));
        CHECK(unpublished(c) == std::vector<notice>{n});
        CHECK(unpublished(c) == std::vector<notice>{n});
        const auto warnings = logs.at(xtel::log_level::warning);
        REQUIRE(warnings.size() == 1);
        CHECK(warnings[0] ==
              "test: agent 'rank0' (pid 4242) could not publish its node file "
              "/dev/shm/rank0.metrics: name_taken: node file /dev/shm/rank0.metrics: in use by "
              "the live writer process 4100");
    }
    // Its lock is free: a killed agent's notice, ignored and left where it is.
    CHECK(unpublished(c).empty());
    CHECK(std::filesystem::exists(path));
    CHECK(c.read_errors_total() == 0);
    collector fresh(settings_of(dir));
    CHECK(unpublished(fresh).empty());
}

TEST_CASE("the collector refuses a notice that is a link, another uid's, too large or garbage",
          "[node_file][notice][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::temp_dir elsewhere;
    const xtel_test::log_capture logs;
    // Each would be a live notice but for what is wrong with it.
    const held_file target(elsewhere.path() / "linked.7.unpublished",
                           format_notice(sample_notice(7)));
    std::filesystem::create_symlink(elsewhere.path() / "linked.7.unpublished",
                                    dir.path() / "linked.7.unpublished");
    auto big_notice = sample_notice(8);
    big_notice.agent_name = "big";
    const held_file big(dir.path() / "big.8.unpublished",
                        format_notice(big_notice) + std::string(4096, ' '));
    const held_file garbage(dir.path() / "garbage.9.unpublished", "not a notice\n");
    auto other = sample_notice(10);
    other.agent_name = "other";
    const held_file renamed(dir.path() / "renamed.10.unpublished", format_notice(other));
    std::unique_ptr<held_file> foreign;
    if (::geteuid() == 0) {
        auto theirs = sample_notice(11);
        theirs.agent_name = "theirs";
        foreign = std::make_unique<held_file>(dir.path() / "theirs.11.unpublished",
                                              format_notice(theirs));
        REQUIRE(::fchown(foreign->fd, 54321, 54321) == 0);
    }
    collector c(settings_of(dir));
    for (int i = 0; i < 3; ++i) {
        CHECK(unpublished(c).empty());
    }
    CHECK(c.read_errors(refusal::not_regular) == 1);
    CHECK(c.read_errors(refusal::too_large) == 1);
    CHECK(c.read_errors(refusal::bad_notice) == 1);
    CHECK(c.read_errors(refusal::name_mismatch) == 1);
    CHECK(c.read_errors(refusal::foreign_owner) == (foreign ? 1u : 0u));
    CHECK(logs.at(xtel::log_level::warning).size() == (foreign ? 5u : 4u));
}

}  // namespace node_notice_test
