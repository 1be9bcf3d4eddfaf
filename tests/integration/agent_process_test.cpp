// Agents in two processes: examples/xfer_demo serves as the other agent, metadata goes through a
// file, and each process's flight recorder is read back afterwards.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "agent_support.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

extern char** environ;

namespace agent_process_test {

using namespace agent_test;
using xtel::descriptor;
using xtel::status_code;
using xtel::transfer_handle;
using xtel::transfer_op;

#if defined(XTEL_XFER_DEMO)

namespace {

/// A child process, killed and reaped if the test ends before it does.
class child {
  public:
    child(const std::vector<std::string>& args,
          const std::vector<std::string>& env,
          const std::filesystem::path& log) {
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(XTEL_XFER_DEMO));
        for (const auto& a : args) {
            argv.push_back(const_cast<char*>(a.c_str()));
        }
        argv.push_back(nullptr);
        // The parent's environment without its own NIXL_TELEMETRY_* settings, plus `env`.
        std::vector<char*> envp;
        for (char** e = environ; *e != nullptr; ++e) {
            if (std::strncmp(*e, "NIXL_TELEMETRY_", 15) != 0) {
                envp.push_back(*e);
            }
        }
        for (const auto& e : env) {
            envp.push_back(const_cast<char*>(e.c_str()));
        }
        envp.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        const int rc =
            ::posix_spawn(&pid_, XTEL_XFER_DEMO, &actions, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        REQUIRE(rc == 0);
        log_ = log;
    }
    ~child() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    child(const child&) = delete;
    child& operator=(const child&) = delete;

    pid_t pid() const { return pid_; }

    /// The exit status, waiting at most `limit`; -signal if it was killed.
    int wait(std::chrono::seconds limit = std::chrono::seconds(20)) {
        const auto give_up = std::chrono::steady_clock::now() + limit;
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > give_up) {
                FAIL("xfer_demo did not exit within " << limit.count() << " s; its output:\n"
                                                      << output());
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }

    void kill_now() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    std::string output() const {
        std::ifstream f(log_);
        return {std::istreambuf_iterator<char>(f), {}};
    }

  private:
    pid_t pid_ = -1;
    std::filesystem::path log_;
};

std::vector<std::string> telemetry_env(const temp_dir& dir) {
    return {"NIXL_TELEMETRY_ENABLE=y", "NIXL_TELEMETRY_METRIC_SET=both",
            "NIXL_TELEMETRY_EXPORTER=buffer", "NIXL_TELEMETRY_BUFFER_SIZE=65536",
            "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + dir.path().string()};
}

std::vector<std::byte> wait_for_file(const std::filesystem::path& path, child& writer) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(path)) {
        if (std::chrono::steady_clock::now() > give_up) {
            FAIL("no " << path << " within 10 s; xfer_demo said:\n" << writer.output());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::ifstream f(path, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(f), {}};
    std::vector<std::byte> out(bytes.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
}

void touch(const std::filesystem::path& path) {
    std::ofstream(path).put('\n');
}

/// Connects `a` to the xfer_demo target whose metadata is in `md`; returns its one region.
descriptor connect(xtel::agent& a, const std::filesystem::path& md, child& target) {
    const auto blob = wait_for_file(md, target);
    std::string name;
    const auto st = a.load_remote_metadata(blob, name);
    REQUIRE(st.to_string() == "ok");
    REQUIRE(name == "remote_target");
    std::vector<descriptor> regions;
    REQUIRE(a.remote_regions(name, regions).ok());
    REQUIRE(regions.size() == 1);
    return regions.front();
}

/// Posts one transfer per block of `n` bytes from `base` and waits for all of them.
void transfer_blocks(xtel::agent& a,
                     transfer_op op,
                     std::byte* local,
                     const descriptor& remote,
                     std::uint64_t n,
                     std::uint64_t block) {
    std::vector<transfer_handle> handles;
    for (std::uint64_t off = 0; off < n; off += block) {
        transfer_handle h;
        const std::vector<descriptor> l{descriptor::dram(local + off, block)};
        const std::vector<descriptor> r{descriptor{remote.address + off, block}};
        REQUIRE(a.create_transfer(op, l, r, "remote_target", h).ok());
        const auto st = a.post(h);
        REQUIRE((st.ok() || st.code() == status_code::in_progress));
        handles.push_back(h);
    }
    for (const auto h : handles) {
        const auto st = wait_for(a, h);
        REQUIRE(st.to_string() == "ok");
        REQUIRE(a.release(h).ok());
    }
}

/// What an agent's node file holds last (the agent has stopped: its final numbers).
xtel::metrics::snapshot latest_snapshot(const std::filesystem::path& file) {
    xtel::node::file::reader r(file);
    const auto p = r.read_latest();
    REQUIRE(p);
    return xtel::metrics::decode_snapshot(p->payload);
}

/// A histogram family's observations and their sum in microseconds, every series added up.
struct histogram_total {
    std::uint64_t count = 0;
    std::uint64_t sum_us = 0;
};

histogram_total histogram_of(const xtel::metrics::snapshot& s, std::string_view family) {
    for (const auto& f : s.families) {
        if (f.spec.name != family) {
            continue;
        }
        // Kept in units of 10^-decimals seconds: whole microseconds need decimals >= 6.
        REQUIRE(f.spec.decimals >= 6);
        std::uint64_t per_us = 1;
        for (int i = 6; i < f.spec.decimals; ++i) {
            per_us *= 10;
        }
        histogram_total t;
        for (const auto& series : f.series) {
            t.count += series.count;
            REQUIRE(series.sum % per_us == 0);
            t.sum_us += series.sum / per_us;
        }
        return t;
    }
    FAIL("the snapshot has no family " << family);
    return {};
}

}  // namespace

TEST_CASE("an agent in another process is read and written through metadata in a file") {
    temp_dir dir;
    constexpr std::uint64_t total = 4 << 20, block = 64 << 10;
    const auto md = dir.path() / "metadata";
    child target({"--role", "target", "--metadata", md.string(), "--total", "4M", "--seed", "5",
                  "--target-name", "remote_target", "--timeout", "20"},
                 telemetry_env(dir), dir.path() / "target.log");
    const auto target_pid = static_cast<std::uint64_t>(target.pid());
    {
        auto a = xtel::make_agent("local_initiator", telemetry_config(dir));
        const descriptor remote = connect(*a, md, target);
        CHECK(remote.length == total);
        std::vector<std::byte> local(total);
        REQUIRE(a->register_memory(descriptor::dram(local.data(), total)).ok());

        // The target filled its buffer with stream 2 * seed + 1; xfer_demo expects 2 * seed + 2
        // back.
        transfer_blocks(*a, transfer_op::read, local.data(), remote, total, block);
        CHECK(demo_check(local.data(), total, 11));
        demo_fill(local.data(), total, 12);
        transfer_blocks(*a, transfer_op::write, local.data(), remote, total, block);
        touch(md.string() + ".done");
        INFO(target.output());
        CHECK(target.wait() == 0);
        CHECK_THAT(target.output(), Catch::Contains("target: verified 4194304 bytes (as the "
                                                    "initiator wrote them)"));
    }
    const auto s = summarize_file(dir.path() / "local_initiator");
    CHECK(s.sum_of("agent_rx_bytes") == total);
    CHECK(s.sum_of("agent_rx_requests_num") == total / block);
    CHECK(s.sum_of("agent_tx_bytes") == total);
    CHECK(s.sum_of("agent_tx_requests_num") == total / block);
    CHECK(s.count_of("agent_xfer_time") == 2 * total / block);
    CHECK(s.in_category(xtel::category::error) == 0);

    const auto t = summarize_file(dir.path() / "remote_target");
    CHECK(t.values_of("agent_memory_registered") == std::vector<std::uint64_t>{total, 0});
    CHECK(t.values_of("agent_memory_deregistered") == std::vector<std::uint64_t>{total});
    CHECK(t.values_of("agent_start") == std::vector<std::uint64_t>{target_pid});
    CHECK(t.values_of("agent_stop") == std::vector<std::uint64_t>{target_pid});
}

TEST_CASE("xfer_demo in two processes verifies its data and its flight recorders agree") {
    temp_dir dir;
    const auto md = (dir.path() / "metadata").string();
    const std::vector<std::string> common{"--metadata",       md,
                                          "--total",          "8M",
                                          "--block",          "64K",
                                          "--target-name",    "remote_target",
                                          "--initiator-name", "remote_initiator",
                                          "--timeout",        "20"};
    auto args = [&](std::vector<std::string> extra) {
        extra.insert(extra.end(), common.begin(), common.end());
        return extra;
    };
    // Registered (not allocated) memory at the target: writes need the target's progress.
    child target(args({"--role", "target", "--target-memory", "registered"}), telemetry_env(dir),
                 dir.path() / "target.log");
    wait_for_file(md, target);
    child initiator(args({"--role", "initiator"}), telemetry_env(dir),
                    dir.path() / "initiator.log");
    INFO("initiator:\n" << initiator.output() << "target:\n" << target.output());
    REQUIRE(initiator.wait() == 0);
    REQUIRE(target.wait() == 0);
    CHECK_THAT(initiator.output(), Catch::Contains("initiator: verified 8388608 bytes read"));
    CHECK_THAT(target.output(), Catch::Contains("target: verified 8388608 bytes"));

    const auto i = summarize_file(dir.path() / "remote_initiator");
    CHECK(i.sum_of("agent_rx_bytes") == 8 << 20);
    CHECK(i.sum_of("agent_tx_bytes") == 8 << 20);
    CHECK(i.sum_of("agent_rx_requests_num") == 128);
    CHECK(i.sum_of("agent_tx_requests_num") == 128);
    CHECK(i.values_of("agent_memory_registered") == std::vector<std::uint64_t>{8 << 20, 0});
    CHECK(i.count_of("agent_connect") == 1);
    CHECK(i.in_category(xtel::category::error) == 0);
    const auto t = summarize_file(dir.path() / "remote_target");
    CHECK(t.values_of("agent_memory_registered") == std::vector<std::uint64_t>{8 << 20, 0});
    CHECK(t.count_of("agent_tx_bytes") == 0);
}

/// The bytes a line of `output` that starts with `prefix` names right after it.
std::uint64_t bytes_after(const std::string& output, const std::string& prefix) {
    const auto at = output.find(prefix);
    REQUIRE(at != std::string::npos);
    return std::stoull(output.substr(at + prefix.size()));
}

TEST_CASE("xfer_demo stops at --duration inside a pass and checks what the pass moved") {
    // The limit was checked between passes only: at 100 transfers a second a pass of 64 MiB
    // (1024 reads of 64 KiB, then 1024 writes) takes 20 s, and --duration 1 ran all of it.
    temp_dir dir;
    const auto started = std::chrono::steady_clock::now();
    child demo({"--duration", "1", "--rate", "100", "--total", "64M"}, telemetry_env(dir),
               dir.path() / "demo.log");
    const int rc = demo.wait(std::chrono::seconds(20));
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    const std::string out = demo.output();
    INFO(out);
    CHECK(rc == 0);
    CHECK(took.count() < 5.0);  // 1 s and the agents' start; 20 s before
    // About a second's reads, every one checked; no write: the target unchanged.
    const auto read = bytes_after(out, "initiator: verified ");
    CHECK(read >= 16 * 65536);
    CHECK(read <= 200 * 65536);
    CHECK(read % 65536 == 0);
    CHECK_THAT(out, Catch::Contains("target: verified 67108864 bytes (0 as the initiator wrote "
                                    "them, the rest unchanged)"));
    CHECK_THAT(out,
               Catch::Contains(", each verified (the last one as far as --duration let it go)"));
}

TEST_CASE(
    "a target in another process checks the part of its buffer that a write stopped at "
    "--duration wrote") {
    temp_dir dir;
    const auto md = (dir.path() / "metadata").string();
    const std::vector<std::string> common{"--metadata", md,       "--total", "64M",       "--op",
                                          "write",      "--rate", "100",     "--timeout", "20"};
    auto args = [&](std::vector<std::string> extra) {
        extra.insert(extra.end(), common.begin(), common.end());
        return extra;
    };
    child target(args({"--role", "target"}), telemetry_env(dir), dir.path() / "target.log");
    wait_for_file(md, target);
    child initiator(args({"--role", "initiator", "--duration", "1"}), telemetry_env(dir),
                    dir.path() / "initiator.log");
    INFO("initiator:\n" << initiator.output() << "target:\n" << target.output());
    REQUIRE(initiator.wait(std::chrono::seconds(10)) == 0);
    REQUIRE(target.wait(std::chrono::seconds(10)) == 0);
    // The target learns from the done file how far the write went, and checks both parts.
    const std::string said = target.output();
    const auto at = said.find("target: verified 67108864 bytes (");
    REQUIRE(at != std::string::npos);
    const auto written = std::stoull(said.substr(at + 33));
    CHECK(written >= 16 * 65536);
    CHECK(written <= 200 * 65536);
    CHECK(written % 65536 == 0);
    CHECK_THAT(said, Catch::Contains(" as the initiator wrote them, the rest unchanged)"));
}

TEST_CASE(
    "writes that complete after their post show post times below their transfer times, in the "
    "recorder and the families alike",
    "[post_time]") {
    temp_dir dir;
    // Over TCP a write is still in flight when its post returns: the flush that tracks it waits
    // for the target's acknowledgement. Over shared memory it would complete inside the post.
    std::vector<std::string> env = telemetry_env(dir);
    env.emplace_back("NIXL_TELEMETRY_EXPORTER=buffer,node");
    env.emplace_back("NIXL_TELEMETRY_TIMING_SAMPLE=1");  // every transfer timed
    env.emplace_back("UCX_TLS=tcp");
    std::erase(env, "NIXL_TELEMETRY_EXPORTER=buffer");
    child demo({"--op", "write", "--total", "1M", "--block", "64K"}, env, dir.path() / "demo.log");
    INFO(demo.output());
    REQUIRE(demo.wait(std::chrono::seconds(60)) == 0);

    // The recorder: each completed write's transfer time, then its post time.
    const auto events = summarize_file(dir.path() / "xfer_initiator");
    const auto xfer = events.values_of("agent_xfer_time");
    const auto post = events.values_of("agent_xfer_post_time");
    REQUIRE(xfer.size() == 16);
    REQUIRE(post.size() == 16);
    std::size_t completed_later = 0;
    for (std::size_t i = 0; i < xfer.size(); ++i) {
        INFO("write " << i << ": post " << post[i] << " us, transfer " << xfer[i] << " us");
        CHECK(post[i] <= xfer[i]);
        completed_later += post[i] < xfer[i] ? 1 : 0;
    }
    CHECK(completed_later > 0);

    // The families agree with the recorder, transfer by transfer summed.
    const auto snap = latest_snapshot(dir.path() / "xfer_initiator.metrics");
    const auto duration = histogram_of(snap, "xtel_transfer_duration_seconds");
    const auto post_duration = histogram_of(snap, "xtel_transfer_post_duration_seconds");
    CHECK(duration.count == 16);
    CHECK(post_duration.count == 16);
    CHECK(duration.sum_us == events.sum_of("agent_xfer_time"));
    CHECK(post_duration.sum_us == events.sum_of("agent_xfer_post_time"));
    CHECK(post_duration.sum_us < duration.sum_us);
}

TEST_CASE("a transfer to an agent whose process was killed ends in an error and an ERROR event") {
    // Allocated memory is written directly, registered memory with the target's help: UCX
    // notices the death differently for each.
    const std::string memory = GENERATE(as<std::string>{}, "allocated", "registered");
    INFO("target memory: " << memory);
    temp_dir dir;
    const auto md = dir.path() / "metadata";
    child target({"--role", "target", "--metadata", md.string(), "--total", "1M", "--target-name",
                  "remote_target", "--timeout", "20", "--target-memory", memory},
                 telemetry_env(dir), dir.path() / "target.log");
    std::chrono::steady_clock::duration detected{};
    {
        xtel::agent_options opts;
        opts.transfer_timeout = std::chrono::seconds(8);  // a backstop; UCX should be faster
        auto a = xtel::make_agent("survivor", telemetry_config(dir), opts);
        const descriptor remote = connect(*a, md, target);
        std::vector<std::byte> local(65536);
        REQUIRE(a->register_memory(descriptor::dram(local.data(), local.size())).ok());
        transfer_handle h;
        REQUIRE(a->create_transfer(
                     transfer_op::write, std::vector{descriptor::dram(local.data(), 65536)},
                     std::vector{descriptor{remote.address, 65536}}, "remote_target", h)
                    .ok());
        REQUIRE(run(*a, h).ok());

        target.kill_now();
        // Writes into shared memory the dead process mapped may still complete locally until
        // UCX notices; keep writing until it does, which must be soon.
        const auto start = std::chrono::steady_clock::now();
        xtel::status st;
        while (st.ok() && std::chrono::steady_clock::now() - start < std::chrono::seconds(15)) {
            st = run(*a, h);
        }
        detected = std::chrono::steady_clock::now() - start;
        CHECK(st.code() == status_code::remote_disconnected);
        CHECK_THAT(st.message(), Catch::Contains("'remote_target'"));
        CHECK(detected < std::chrono::seconds(8));
        // Nothing more is attempted on the dead connection.
        CHECK(a->post(h).code() == status_code::remote_disconnected);
        CHECK(a->release(h).ok());
    }
    const auto s = summarize_file(dir.path() / "survivor");
    CHECK(s.sum_of("agent_error_remote_disconnected") == 2);
    CHECK(s.in_category(xtel::category::error) == 2);
    CHECK(s.count_of("agent_disconnect") == 1);
    CHECK(s.count_of("ucx_endpoint_error") == 1);
    WARN(memory << ": peer failure detected after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(detected).count()
                << " ms");
}

#endif  // XTEL_XFER_DEMO

}  // namespace agent_process_test
