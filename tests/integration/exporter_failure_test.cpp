// Exporters that cannot write, behind real agents moving real data over UCX: a flight recorder
// directory the agent may not write, a file system without room for the flight recorder, a
// Prometheus port that is taken, a plugin that throws. Each time the exporter logs exactly one
// error and counts what it loses, every transfer completes with its data intact, and the
// other exporter of the pipeline loses nothing.

#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "agent_support.hpp"
#include "test_util.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/core/log.hpp"

namespace exporter_failure_test {

using namespace agent_test;

namespace {

constexpr std::size_t block = 64 * 1024;
constexpr int transfers = 16;

/// Telemetry on with `exporters`, the flight recorder (when named) in `dir`.
xtel::config telemetry(const temp_dir& dir, std::vector<std::string> exporters) {
    auto cfg = telemetry_config(dir);
    cfg.exporters = std::move(exporters);
    return cfg;
}

/// A target with telemetry off and an initiator whose telemetry is under test, connected. The
/// initiator's flusher is off, so its counts are compared exactly after flush_telemetry().
struct agent_pair {
    explicit agent_pair(const xtel::config& cfg)
        : target(xtel::make_agent("target", xtel::config{})),
          initiator(xtel::make_agent("initiator", cfg, no_flusher())) {}

    static xtel::agent_options no_flusher() {
        xtel::agent_options o;
        o.telemetry.start_flusher = false;
        return o;
    }

    /// Writes `transfers` blocks of a known pattern to the target, one transfer each, and
    /// returns true when every one completed and the target holds the pattern.
    bool move_data() {
        std::vector<std::byte> local(block * transfers), remote(block * transfers);
        demo_fill(local.data(), local.size(), 11);
        const auto l = xtel::descriptor::dram(local.data(), local.size());
        const auto r = xtel::descriptor::dram(remote.data(), remote.size());
        REQUIRE(target->register_memory(r).ok());
        REQUIRE(initiator->register_memory(l).ok());
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string peer;
        REQUIRE(initiator->load_remote_metadata(blob, peer).ok());
        for (int i = 0; i < transfers; ++i) {
            const std::vector<xtel::descriptor> from{
                xtel::descriptor::dram(local.data() + i * block, block)};
            const std::vector<xtel::descriptor> to{
                xtel::descriptor::dram(remote.data() + i * block, block)};
            xtel::transfer_handle h;
            REQUIRE(initiator->create_transfer(xtel::transfer_op::write, from, to, peer, h).ok());
            REQUIRE(run(*initiator, h, target.get()).ok());
            REQUIRE(initiator->release(h).ok());
        }
        REQUIRE(initiator->deregister_memory(l).ok());
        REQUIRE(target->deregister_memory(r).ok());
        initiator->flush_telemetry();
        return demo_check(remote.data(), remote.size(), 11);
    }

    std::unique_ptr<xtel::agent> target;
    std::unique_ptr<xtel::agent> initiator;
};

/// The value of the first sample of `family` for the initiator in a scrape; empty when none.
std::string scraped(const std::string& text, std::string_view family) {
    const auto at = text.find("\n" + std::string(family) + R"({agent_name="initiator")");
    if (at == std::string::npos) {
        return {};
    }
    const auto space = text.find("} ", at);
    return text.substr(space + 2, text.find('\n', space) - space - 2);
}

std::string scrape_of(xtel::agent& a) {
    auto& typed = dynamic_cast<xtel::basic_agent<xtel::buffer_prometheus_telemetry>&>(a);
    return typed.telemetry().get<xtel::prometheus_exporter>().scrape();
}

/// Makes a directory one this thread cannot create files in, as root too: mode 0500, and the
/// thread's CAP_DAC_OVERRIDE lowered from its effective set while the scope lasts (capabilities
/// belong to threads; a process that is not root has none to lower).
class unwritable_directory {
  public:
    explicit unwritable_directory(const std::filesystem::path& dir) : dir_(dir) {
        ::chmod(dir.c_str(), 0500);
        header_.version = _LINUX_CAPABILITY_VERSION_3;
        header_.pid = 0;
        if (::syscall(SYS_capget, &header_, saved_) == 0) {
            __user_cap_data_struct lowered[2];
            std::memcpy(lowered, saved_, sizeof lowered);
            lowered[0].effective &= ~(1u << CAP_DAC_OVERRIDE);
            restore_ = ::syscall(SYS_capset, &header_, lowered) == 0;
        }
    }
    ~unwritable_directory() {
        if (restore_) {
            ::syscall(SYS_capset, &header_, saved_);
        }
        ::chmod(dir_.c_str(), 0700);
    }
    unwritable_directory(const unwritable_directory&) = delete;
    unwritable_directory& operator=(const unwritable_directory&) = delete;

    /// Whether creating a file there fails now, as the test needs.
    bool in_effect() const {
        const auto probe = dir_ / "probe";
        const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            ::close(fd);
            ::unlink(probe.c_str());
            return false;
        }
        return errno == EACCES;
    }

  private:
    std::filesystem::path dir_;
    __user_cap_header_struct header_{};
    __user_cap_data_struct saved_[2]{};
    bool restore_ = false;
};

/// Files this process writes cannot grow past `bytes` while the scope lasts (RLIMIT_FSIZE), as
/// on a file system with only that much room left; a non-root process may lower its own limit,
/// and root is held to it too. SIGXFSZ, which the kernel sends at the limit, is ignored meanwhile,
/// so the failing call returns EFBIG instead.
class file_size_limit {
  public:
    explicit file_size_limit(rlim_t bytes) {
        ::getrlimit(RLIMIT_FSIZE, &saved_);
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGXFSZ, &ignore, &saved_action_);
        rlimit lowered = saved_;
        lowered.rlim_cur = bytes;
        ::setrlimit(RLIMIT_FSIZE, &lowered);
    }
    ~file_size_limit() {
        ::setrlimit(RLIMIT_FSIZE, &saved_);
        ::sigaction(SIGXFSZ, &saved_action_, nullptr);
    }
    file_size_limit(const file_size_limit&) = delete;
    file_size_limit& operator=(const file_size_limit&) = delete;

  private:
    rlimit saved_{};
    struct sigaction saved_action_ {};
};

/// A loopback TCP port held by a listening socket for the life of the object.
class taken_port {
  public:
    taken_port() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_, 1) == 0);
        REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        address_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    }
    ~taken_port() { ::close(fd_); }
    taken_port(const taken_port&) = delete;
    taken_port& operator=(const taken_port&) = delete;

    const std::string& address() const { return address_; }

  private:
    int fd_;
    std::string address_;
};

/// Checks what every test here expects of the initiator once its data has moved: the failing
/// exporter lost every event it was handed, and it alone.
void check_lost_everything(const xtel::telemetry_stats& s) {
    CHECK(s.exporters_disabled == 1);
    CHECK(s.events_exported > 4 * transfers);
    CHECK(s.events_lost == s.events_exported);
    CHECK(s.records_dropped == 0);
    CHECK(s.export_errors == 0);
}

}  // namespace

TEST_CASE(
    "an agent whose flight recorder directory it may not write goes on transferring, "
    "logs one error and counts the lost events") {
    temp_dir dir;
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets("NIXL_TELEMETRY_METRIC_SET", "both");
    const xtel_test::log_capture logs;
    {
        const unwritable_directory read_only(dir.path());
        REQUIRE(read_only.in_effect());
        agent_pair p(telemetry(dir, {"buffer", "prometheus"}));
        CHECK(p.move_data());
        check_lost_everything(p.initiator->stats());
        // The Prometheus exporter beside it got every transfer.
        const auto text = scrape_of(*p.initiator);
        CHECK(scraped(text, "agent_tx_bytes_total") == std::to_string(block * transfers));
        CHECK(scraped(text, "agent_tx_requests_num_total") == std::to_string(transfers));
    }
    CHECK_FALSE(std::filesystem::exists(dir.path() / "initiator"));
    const auto lines = logs.at(xtel::log_level::error);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("agent 'initiator': flight recorder disabled") &&
                             Catch::Contains("Permission denied"));
}

TEST_CASE(
    "an agent whose flight recorder does not fit on the file system goes on transferring, "
    "logs one error and counts the lost events") {
    temp_dir dir;
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets("NIXL_TELEMETRY_METRIC_SET", "both");
    const xtel_test::log_capture logs;
    {
        std::unique_ptr<agent_pair> p;
        {
            // Room for 64 KiB; the flight recorder of 65536 events needs 4 MiB. UCX's posix
            // shared-memory transport keeps its own buffers in files too, and would not start
            // either (a full /dev/shm stops it as well), so the agents use System V shared
            // memory, which is no file, for this test.
            const xtel_test::scoped_env no_posix_files("UCX_TLS", "^posix");
            const file_size_limit full(64 * 1024);
            p = std::make_unique<agent_pair>(telemetry(dir, {"buffer", "prometheus"}));
        }
        CHECK(p->move_data());
        check_lost_everything(p->initiator->stats());
        const auto text = scrape_of(*p->initiator);
        CHECK(scraped(text, "agent_tx_bytes_total") == std::to_string(block * transfers));
    }
    // Nothing half-made is left behind: no flight recorder, no temporary file.
    CHECK(std::filesystem::is_empty(dir.path()));
    const auto lines = logs.at(xtel::log_level::error);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("agent 'initiator': flight recorder disabled") &&
                             Catch::Contains("cannot reserve 4194432 bytes"));
}

TEST_CASE(
    "an agent whose Prometheus port is taken goes on transferring, logs one error and "
    "counts the lost events") {
    temp_dir dir;
    const taken_port port;
    const xtel_test::scoped_env address(xtel::env::prometheus_address, port.address());
    const xtel_test::scoped_env sets("NIXL_TELEMETRY_METRIC_SET", "both");
    const xtel_test::log_capture logs;
    {
        agent_pair p(telemetry(dir, {"buffer", "prometheus"}));
        CHECK(p.move_data());
        check_lost_everything(p.initiator->stats());
        CHECK(scrape_of(*p.initiator).empty());
    }
    // The flight recorder beside it got every transfer.
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == block * transfers);
    CHECK(s.sum_of("agent_tx_requests_num") == transfers);
    const auto lines = logs.at(xtel::log_level::error);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("agent 'initiator': Prometheus exporter inactive") &&
                             Catch::Contains("cannot listen on " + port.address()) &&
                             Catch::Contains("the port is already in use"));
}

TEST_CASE(
    "an agent whose plugin throws on every call goes on transferring, logs one error and "
    "counts the lost events") {
    temp_dir dir;
    auto cfg = telemetry(dir, {"buffer", "always_throws"});
    cfg.plugin_dir = XTEL_TEST_PLUGIN_DIR;
    const xtel_test::log_capture logs;
    {
        agent_pair p(cfg);
        CHECK(p.move_data());
        const auto stats = p.initiator->stats();
        // The plugin stays on (another event may succeed); each event it throws on is lost.
        CHECK(stats.exporters_disabled == 0);
        CHECK(stats.events_lost == stats.events_exported);
        CHECK(stats.export_errors == 0);
        auto& typed = dynamic_cast<xtel::basic_agent<xtel::buffer_plugin_telemetry>&>(*p.initiator);
        const auto status = typed.telemetry().get<xtel::plugin_exporter>().status();
        REQUIRE(status.size() == 1);
        CHECK(status[0].active);
        CHECK(status[0].events_lost == stats.events_exported);
        CHECK(status[0].failures == stats.events_exported + 1);  // and the one flush
    }
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == block * transfers);
    const auto lines = logs.at(xtel::log_level::error);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("agent 'initiator'") &&
                             Catch::Contains("plugin 'always_throws'") &&
                             Catch::Contains("no space left on the collector"));
}

TEST_CASE(
    "an agent whose plugin cannot build its exporter goes on transferring, logs one error "
    "and counts the lost events") {
    temp_dir dir;
    auto cfg = telemetry(dir, {"buffer", "ctor_throws"});
    cfg.plugin_dir = XTEL_TEST_PLUGIN_DIR;
    const xtel_test::log_capture logs;
    {
        agent_pair p(cfg);
        CHECK(p.move_data());
        check_lost_everything(p.initiator->stats());
    }
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == block * transfers);
    const auto lines = logs.at(xtel::log_level::error);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("agent 'initiator'") &&
                             Catch::Contains("cannot reach the collector") &&
                             Catch::Contains("disabled"));
}

}  // namespace exporter_failure_test
