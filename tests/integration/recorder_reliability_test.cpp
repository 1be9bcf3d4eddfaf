// The real xfer_demo against what can happen to its flight recorders while it runs: the files
// cut short, deleted or replaced, a second process of the same agent names, a crash and a
// restart. The transfers must go on and verify, the agent must say once what happened, and no
// signal may come from a recorder file.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "xtel/exporters/flight_recorder.hpp"

extern char** environ;

namespace recorder_reliability_test {

#if defined(XTEL_XFER_DEMO)

namespace {

using xtel_test::temp_dir;
namespace fr = xtel::flight_recorder;

/// xfer_demo as a child process with its stdout and stderr in files; killed and reaped if the
/// test ends first.
class demo {
  public:
    demo(const temp_dir& dir, const std::string& tag, const std::vector<std::string>& args)
        : out_(dir / (tag + ".out")), err_(dir / (tag + ".err")) {
        std::vector<std::string> env{
            "NIXL_TELEMETRY_ENABLE=y", "NIXL_TELEMETRY_EXPORTER=buffer",
            "NIXL_TELEMETRY_BUFFER_SIZE=65536",
            "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + (dir / "recorders").string()};
        std::filesystem::create_directories(dir / "recorders");
        std::vector<char*> argv{const_cast<char*>(XTEL_XFER_DEMO)};
        for (const auto& a : args) {
            argv.push_back(const_cast<char*>(a.c_str()));
        }
        argv.push_back(nullptr);
        std::vector<char*> envp;
        for (char** e = environ; *e != nullptr; ++e) {
            if (std::string_view(*e).substr(0, 15) != "NIXL_TELEMETRY_") {
                envp.push_back(*e);
            }
        }
        for (auto& e : env) {
            envp.push_back(e.data());
        }
        envp.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        const int rc =
            ::posix_spawn(&pid_, XTEL_XFER_DEMO, &actions, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        REQUIRE(rc == 0);
    }
    ~demo() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    demo(const demo&) = delete;
    demo& operator=(const demo&) = delete;

    pid_t pid() const { return pid_; }

    /// The exit status as a shell reports it: 128 + signal when killed (SIGBUS: 135).
    int wait(std::chrono::seconds limit = std::chrono::seconds(120)) {
        const auto give_up = std::chrono::steady_clock::now() + limit;
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > give_up) {
                FAIL("xfer_demo did not exit within " << limit.count() << " s; stderr:\n" << err());
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    void kill_now() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    std::string out() const { return slurp(out_); }
    std::string err() const { return slurp(err_); }

  private:
    static std::string slurp(const std::filesystem::path& p) {
        std::ifstream f(p);
        return {std::istreambuf_iterator<char>(f), {}};
    }

    pid_t pid_ = -1;
    std::filesystem::path out_;
    std::filesystem::path err_;
};

/// Waits until `path` holds a recorder with published events.
void wait_for_events(const std::filesystem::path& path, const demo& d) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < give_up) {
        if (std::filesystem::exists(path) && fr::reader(path).published_count() > 0) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("no events in " << path << " within 30 s; xfer_demo said:\n" << d.out() << d.err());
}

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

/// Runs a command of the host (truncate, rm, mv) as an operator would.
void shell_tool(const std::vector<std::string>& argv) {
    const auto r = xtel_test::run(argv);
    INFO(argv[0] << ": " << r.err);
    REQUIRE(r.exit_code == 0);
}

const std::vector<std::string> small_passes{"--total", "4M", "--block", "64K"};

std::vector<std::string> with(std::vector<std::string> args, std::vector<std::string> more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

}  // namespace

TEST_CASE(
    "xfer_demo goes on transferring and says once what happened when its flight recorder is "
    "truncated, shrunk, deleted or replaced") {
    const std::string damage = GENERATE(as<std::string>{}, "truncate", "shrink", "rm", "mv");
    CAPTURE(damage);
    temp_dir dir;
    const auto path = dir / "recorders" / "xfer_initiator";
    demo d(dir, "demo", with(small_passes, {"--duration", "3"}));
    wait_for_events(path, d);

    if (damage == "truncate") {
        shell_tool({"truncate", "-s", "0", path.string()});
    } else if (damage == "shrink") {
        const auto half = std::filesystem::file_size(path) / 2;
        shell_tool({"truncate", "-s", std::to_string(half), path.string()});
    } else if (damage == "rm") {
        shell_tool({"rm", path.string()});
    } else {
        std::ofstream(dir / "impostor") << "not a flight recorder";
        shell_tool({"mv", (dir / "impostor").string(), path.string()});
    }

    const int rc = d.wait();
    const auto err = d.err();
    INFO("stdout:\n" << d.out() << "stderr:\n" << err);
    CHECK(rc != 128 + SIGBUS);
    CHECK(rc == 0);
    CHECK_THAT(d.out(), Catch::Contains("each verified"));
    CHECK(occurrences(err, path.string()) == 1);
    CHECK_THAT(err, Catch::Contains("recording stopped"));
    CHECK(occurrences(err, "recording stopped") == 1);
}

TEST_CASE(
    "a second xfer_demo with the same agent names transfers without touching the first's "
    "flight recorders") {
    temp_dir dir;
    const auto initiator = dir / "recorders" / "xfer_initiator";
    const auto target = dir / "recorders" / "xfer_target";
    demo first(dir, "first", with(small_passes, {"--duration", "4"}));
    wait_for_events(initiator, first);
    wait_for_events(target, first);
    const auto first_pid = std::to_string(first.pid());

    demo second(dir, "second", small_passes);
    const int second_rc = second.wait();
    const auto second_err = second.err();
    INFO("second's stderr:\n" << second_err);
    CHECK(second_rc == 0);
    for (const auto& p : {initiator, target}) {
        CHECK(occurrences(second_err, p.string()) == 1);
    }
    CHECK(occurrences(second_err, "live writer process " + first_pid) == 2);

    const auto published_mid_way = fr::reader(initiator).published_count();
    CHECK(first.wait() == 0);
    for (const auto& p : {initiator, target}) {
        fr::reader r(p);
        CHECK(r.writer_pid() == static_cast<std::uint32_t>(std::stoul(first_pid)));
        CHECK(r.writer_closed());
        std::uint64_t events = 0;
        r.poll([&](const xtel::event&) { ++events; });
        CHECK(events > 0);
        CHECK(events + r.missed() == r.published_count());  // the ring wraps; nothing is torn
    }
    CHECK(fr::reader(initiator).published_count() > published_mid_way);
    CHECK_FALSE(
        std::filesystem::exists(dir / "recorders" / ("xfer_initiator.crashed." + first_pid)));
}

TEST_CASE(
    "an xfer_demo killed with SIGKILL leaves its flight recorders as <name>.crashed.<pid> for "
    "the one started after it") {
    temp_dir dir;
    const auto initiator = dir / "recorders" / "xfer_initiator";
    demo victim(dir, "victim", with(small_passes, {"--duration", "60"}));
    wait_for_events(initiator, victim);
    const auto dead = std::to_string(victim.pid());
    victim.kill_now();

    demo next(dir, "next", small_passes);
    CHECK(next.wait() == 0);
    const auto err = next.err();
    INFO("stderr:\n" << err);
    for (const std::string name : {"xfer_initiator", "xfer_target"}) {
        const auto kept = dir / "recorders" / (name + ".crashed." + dead);
        REQUIRE(std::filesystem::exists(kept));
        CHECK(occurrences(err, kept.string()) == 1);
        fr::reader r(kept);
        CHECK(r.writer_pid() == static_cast<std::uint32_t>(std::stoul(dead)));
        CHECK_FALSE(r.writer_closed());
        CHECK(r.published_count() > 0);
        CHECK(r.agent_name() == name);
        fr::reader now(dir / "recorders" / name);
        CHECK(now.writer_pid() != r.writer_pid());
        CHECK(now.writer_closed());
    }
}

#endif

}  // namespace recorder_reliability_test
