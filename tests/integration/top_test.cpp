// xtel top over real agents: xfer_demo processes publish node files, and the view, printed once
// or captured from a tmux pane, shows their names and the exact bytes they moved; keys change
// it, and q or a signal gives the terminal back as it was.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "prometheus_support.hpp"
#include "test_util.hpp"

namespace top_test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using xtel_test::temp_dir;

constexpr std::uint64_t mib = 1 << 20;

std::vector<std::pair<std::string, std::string>> node_env(const fs::path& dir) {
    return {{"NIXL_TELEMETRY_ENABLE", "y"},
            {"NIXL_TELEMETRY_EXPORTER", "node"},
            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.string()},
            {"NIXL_TELEMETRY_RUN_INTERVAL", "50"}};
}

prom_it::spawn_options demo_options(const fs::path& dir, std::vector<std::string> args) {
    prom_it::spawn_options o;
    o.argv = {XTEL_XFER_DEMO};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = node_env(dir);
    return o;
}

/// Runs xfer_demo with `args` to its end (its agents' files then closed); returns its pid.
pid_t run_demo(const fs::path& dir, std::vector<std::string> args) {
    prom_it::child_process demo(demo_options(dir, std::move(args)));
    const pid_t pid = demo.pid();
    const auto rc = demo.wait(120s);
    INFO(demo.output());
    REQUIRE(rc == 0);
    return pid;
}

std::vector<std::string> words(std::string_view line) {
    std::istringstream in{std::string(line)};
    std::vector<std::string> out;
    for (std::string w; in >> w;) {
        out.push_back(w);
    }
    return out;
}

/// The cells of the row of `agent` in a frame (the state "closed 3s" is two of them); empty
/// when the frame has no such row.
std::vector<std::string> row_of(std::string_view frame, std::string_view agent) {
    std::istringstream in{std::string(frame)};
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with(std::string(agent) + " ")) {
            return words(line);
        }
    }
    return {};
}

xtel_test::run_result top_once(const fs::path& dir, std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {XTEL_TOP, "top",        "--dir", dir.string(),
                                     "--once", "--interval", "0.2"};
    argv.insert(argv.end(), more.begin(), more.end());
    return xtel_test::run(argv);
}

}  // namespace

TEST_CASE("xtel top once shows every agent of the directory with the exact bytes each moved",
          "[top]") {
    const temp_dir dir;
    const pid_t a = run_demo(
        dir.path(), {"--name", "once-a", "--op", "both", "--total", "4M", "--block", "64K"});
    run_demo(dir.path(), {"--name", "once-b", "--op", "write", "--total", "1M", "--block", "16K"});

    const auto r = top_once(dir.path());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("agents 4: 0 live, 4 closed, 0 dead") != std::string::npos);
    // Every byte written (tx) and read (rx), summed exactly over the four agents.
    CHECK(r.out.find(fmt::format("total  tx 5.00MiB ({} B)  rx 4.00MiB ({} B)", 5 * mib,
                                 4 * mib)) != std::string::npos);
    const auto row = row_of(r.out, "once-a-initiator");
    REQUIRE(row.size() == 16);
    CHECK(row[1] == std::to_string(a));
    CHECK(row[2] == "-");  // no rank variable
    CHECK(row[3] == "closed");
    CHECK(row[5] == "0B");          // nothing moved in the interval
    CHECK(row[8].ends_with("s*"));  // p50 and p99 since the agent started
    CHECK(row[9].ends_with("s*"));
    CHECK(row[10] == "4.00MiB");
    CHECK(row[11] == "4.00MiB");
    CHECK(row[15] == "-");
    const auto b = row_of(r.out, "once-b-initiator");
    REQUIRE(b.size() == 16);
    CHECK(b[10] == "1.00MiB");
    CHECK(b[11] == "0B");
    CHECK(row_of(r.out, "once-a-target").size() == 16);
    CHECK(row_of(r.out, "once-b-target").size() == 16);
}

TEST_CASE("xtel top once shows the latency of agents that keep native histograms only", "[top]") {
    const temp_dir dir;
    auto o = demo_options(dir.path(),
                          {"--name", "native", "--op", "write", "--total", "1M", "--block", "64K"});
    // No classic bounds: the node file's latency is in its native buckets alone.
    o.env.emplace_back("NIXL_TELEMETRY_HISTOGRAM_KIND", "native");
    prom_it::child_process demo(o);
    const auto rc = demo.wait(120s);
    INFO(demo.output());
    REQUIRE(rc == 0);

    const auto r = top_once(dir.path());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    const auto row = row_of(r.out, "native-initiator");
    REQUIRE(row.size() == 16);
    CHECK(row[10] == "1.00MiB");
    // p50 and p99 since the agent started, from native buckets: a time, not "-".
    CHECK(row[8].ends_with("s*"));
    CHECK(row[9].ends_with("s*"));
}

TEST_CASE(
    "xtel top once shows a write's target with the memory it exposes and no bytes it "
    "cannot see",
    "[top]") {
    const temp_dir dir;
    prom_it::child_process demo(demo_options(
        dir.path(),
        {"--name", "pair", "--op", "write", "--total", "2M", "--block", "64K", "--linger", "120"}));
    REQUIRE(demo.read_line("lingering for", 60s));

    const auto r = top_once(dir.path());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    // The target's 2 MiB are the only memory registered: the initiator let its buffer go.
    CHECK(r.out.find(fmt::format("total  tx 2.00MiB ({0} B)  rx 0B (0 B)  mem 2.00MiB ({0} B)",
                                 2 * mib)) != std::string::npos);
    // AGENT PID RANK STATE TX/s RX/s XFERS/s P50 P99 TX-TOTAL RX-TOTAL MEM PEERS DROPPED ERRORS
    const auto target = row_of(r.out, "pair-target");
    REQUIRE(target.size() == 15);
    CHECK(target[3] == "live");
    for (std::size_t i = 4; i <= 10; ++i) {
        INFO("column " << i);
        CHECK(target[i] == "-");  // written into, one-sided: it saw no transfer of its own
    }
    CHECK(target[11] == "2.00MiB");
    CHECK(target[12] == "0");  // it loaded no peer's metadata: it can reach none
    CHECK(target[14] == "-");
    const auto initiator = row_of(r.out, "pair-initiator");
    REQUIRE(initiator.size() == 15);
    CHECK(initiator[9] == "2.00MiB");
    CHECK(initiator[10] == "0B");
    CHECK(initiator[11] == "0B");
    CHECK(initiator[12] == "1");
    CHECK(r.out.find("\n- under TX and RX: no transfer of its own;") != std::string::npos);
}

TEST_CASE("xtel top once filters by name and sorts by the column asked", "[top]") {
    const temp_dir dir;
    run_demo(dir.path(), {"--name", "big", "--op", "write", "--total", "2M", "--block", "64K"});
    run_demo(dir.path(), {"--name", "small", "--op", "write", "--total", "1M", "--block", "64K"});

    const auto filtered = top_once(dir.path(), {"--filter", "small-*"});
    INFO(filtered.out << filtered.err);
    CHECK(filtered.exit_code == 0);
    CHECK(filtered.out.find(fmt::format("total  tx 1.00MiB ({} B)  rx 0B (0 B)", 1 * mib)) !=
          std::string::npos);
    CHECK(filtered.out.find("filter 'small-*' (2 hidden)") != std::string::npos);
    CHECK(row_of(filtered.out, "big-initiator").empty());
    CHECK_FALSE(row_of(filtered.out, "small-initiator").empty());

    const auto sorted = top_once(dir.path(), {"--sort", "tx-total"});
    INFO(sorted.out);
    const auto big = sorted.out.find("\nbig-initiator ");
    const auto small = sorted.out.find("\nsmall-initiator ");
    REQUIRE(big != std::string::npos);
    REQUIRE(small != std::string::npos);
    CHECK(big < small);
    const auto reversed = top_once(dir.path(), {"--sort", "tx-total", "--reverse"});
    CHECK(reversed.out.find("\nbig-initiator ") > reversed.out.find("\nsmall-initiator "));
}

TEST_CASE("xtel top once names a file it cannot read and shows a killed agent as dead", "[top]") {
    const temp_dir dir;
    prom_it::write_file(dir / "broken.metrics", std::string(300, 'x'));
    prom_it::child_process demo(
        demo_options(dir.path(), {"--name", "killed", "--op", "write", "--total", "2M", "--block",
                                  "64K", "--linger", "120"}));
    REQUIRE(demo.read_line("lingering for", 60s));
    ::kill(demo.pid(), SIGKILL);
    demo.wait(10s);

    const auto r = top_once(dir.path());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find(fmt::format("xtel top: {} is not served (until it changes)",
                                 (dir / "broken.metrics").string())) != std::string::npos);
    CHECK(r.out.find("agents 2: 0 live, 0 closed, 2 dead") != std::string::npos);
    CHECK(r.out.find(fmt::format("total  tx 2.00MiB ({} B)  rx 0B (0 B)", 2 * mib)) !=
          std::string::npos);
    CHECK(r.out.find("unreadable files 1") != std::string::npos);
    const auto row = row_of(r.out, "killed-initiator");
    REQUIRE(row.size() == 16);
    CHECK(row[3] == "dead");
    CHECK(row[10] == "2.00MiB");
}

TEST_CASE("xtel top shows another uid's agents only when --allow-uid names it", "[top]") {
    constexpr const char* setpriv = "/usr/bin/setpriv";
    if (::geteuid() != 0 || ::access(setpriv, X_OK) != 0) {
        WARN(
            "SKIPPED: running a demo as another uid needs the test to run as root, with setpriv "
            "(util-linux)");
        return;
    }
    const temp_dir dir;
    REQUIRE(::chmod(dir.path().c_str(), 01777) == 0);
    run_demo(dir.path(), {"--name", "own", "--op", "write", "--total", "1M", "--block", "64K"});
    {
        auto o = demo_options(
            dir.path(), {"--name", "theirs", "--op", "write", "--total", "2M", "--block", "64K"});
        o.argv.insert(o.argv.begin(),
                      {setpriv, "--reuid=54321", "--regid=54321", "--clear-groups"});
        prom_it::child_process theirs(o);
        const auto rc = theirs.wait(120s);
        INFO(theirs.output());
        REQUIRE(rc == 0);
    }

    const auto r = top_once(dir.path());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(row_of(r.out, "own-initiator").size() == 16);
    CHECK(row_of(r.out, "theirs-initiator").empty());
    CHECK(r.out.find("unreadable files 2") != std::string::npos);
    CHECK(r.err.find(fmt::format("xtel top: {} is not served (until it changes): foreign_owner: "
                                 "owned by uid 54321",
                                 (dir / "theirs-initiator.metrics").string())) !=
          std::string::npos);

    const auto allowed = top_once(dir.path(), {"--allow-uid", "54321"});
    INFO(allowed.out << allowed.err);
    CHECK(allowed.exit_code == 0);
    CHECK(allowed.err.empty());
    const auto row = row_of(allowed.out, "theirs-initiator");
    REQUIRE(row.size() == 16);
    CHECK(row[10] == "2.00MiB");
    CHECK(row_of(allowed.out, "own-initiator").size() == 16);
}

TEST_CASE("xtel top answers an empty directory a missing one and a pipe clearly", "[top]") {
    const temp_dir dir;
    const auto empty = top_once(dir.path());
    CHECK(empty.exit_code == 0);
    CHECK(empty.out.find("no agents: no node file in " + dir.path().string()) != std::string::npos);

    const auto missing =
        xtel_test::run({XTEL_TOP, "top", "--dir", (dir / "nope").string(), "--once"});
    CHECK(missing.exit_code == 64);
    CHECK(missing.out.empty());
    CHECK(missing.err ==
          fmt::format("xtel top: --dir='{}' is invalid: expected the path of an existing "
                      "directory; it does not exist (xtel top --help lists the options)\n",
                      (dir / "nope").string()));

    // Without --once the view needs a terminal; the test's stdout is a file.
    const auto piped = xtel_test::run({XTEL_TOP, "top", "--dir", dir.path().string()});
    CHECK(piped.exit_code == 1);
    CHECK(piped.err.find("standard output is not a terminal") != std::string::npos);
}

namespace {

/// A tmux server of its own (its own socket, no configuration file) with one window running
/// `command`; killed with everything in it when this goes.
class tmux_session {
  public:
    tmux_session(const std::string& command, int width, int height)
        : socket_(fmt::format("xtel-top-test-{}-{}", ::getpid(), ++sessions_)) {
        const auto r = tmux({"-f", "/dev/null", "new-session", "-d", "-x", std::to_string(width),
                             "-y", std::to_string(height), command});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
    }
    ~tmux_session() { tmux({"kill-server"}); }
    tmux_session(const tmux_session&) = delete;
    tmux_session& operator=(const tmux_session&) = delete;

    xtel_test::run_result tmux(std::vector<std::string> args) const {
        args.insert(args.begin(), {XTEL_TMUX, "-L", socket_});
        return xtel_test::run(args);
    }

    std::string screen() const { return tmux({"capture-pane", "-p"}).out; }

    /// A tmux format (#{alternate_on}) for the pane.
    std::string display(const std::string& format) const {
        auto out = tmux({"display-message", "-p", format}).out;
        while (!out.empty() && out.back() == '\n') {
            out.pop_back();
        }
        return out;
    }

    void keys(std::vector<std::string> keys) const {
        keys.insert(keys.begin(), {"send-keys", "-t", "0"});
        tmux(keys);
    }

    /// Captures the screen until `ok` holds for it or `timeout` passes; the last screen.
    std::string wait_for(const std::function<bool(const std::string&)>& ok,
                         std::chrono::milliseconds timeout) const {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        std::string s = screen();
        while (!ok(s) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(100ms);
            s = screen();
        }
        return s;
    }

  private:
    static inline std::atomic<int> sessions_{0};
    std::string socket_;
};

bool has(const std::string& screen, std::string_view part) {
    return screen.find(part) != std::string::npos;
}

/// The shell command a pane runs: xtel top, then what the terminal was left as (stty) and
/// the exit status in files under `out`; then it waits, so that the pane stays.
std::string top_command(const fs::path& dir, const fs::path& out) {
    return fmt::format(
        "'{}' top --dir '{}' --interval 0.5; echo $? > '{}'; stty -a > '{}'; exec sleep 600",
        XTEL_TOP, dir.string(), (out / "exit").string(), (out / "stty").string());
}

/// The pid of the child of `parent` that runs `comm`; 0 when there is none.
pid_t child_named(pid_t parent, std::string_view comm) {
    for (const auto& e : fs::directory_iterator("/proc")) {
        const auto stat = xtel_test::read_file(e.path() / "stat");
        const auto close = stat.rfind(')');
        const auto open = stat.find('(');
        if (close == std::string::npos || open == std::string::npos) {
            continue;
        }
        const auto rest = words(std::string_view(stat).substr(close + 1));
        if (rest.size() > 1 && rest[1] == std::to_string(parent) &&
            stat.substr(open + 1, close - open - 1) == comm) {
            return static_cast<pid_t>(std::stol(e.path().filename().string()));
        }
    }
    return 0;
}

/// After xtel top ended in `session`: it exited 0, and left the terminal as it found it (line
/// editing and echo on, the shell's screen, the cursor shown).
void check_terminal_given_back(const tmux_session& session, const fs::path& out) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!fs::exists(out / "stty") && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(100ms);  // stty's output written whole
    CHECK(xtel_test::read_file(out / "exit") == "0\n");
    const auto stty = words(xtel_test::read_file(out / "stty"));
    const auto flag = [&](std::string_view f) {
        for (auto w : stty) {
            while (!w.empty() && w.back() == ';') {
                w.pop_back();
            }
            if (w == f) {
                return true;
            }
        }
        return false;
    };
    CHECK(flag("icanon"));
    CHECK(flag("echo"));
    CHECK_FALSE(flag("-icanon"));
    CHECK_FALSE(flag("-echo"));
    CHECK(session.display("#{alternate_on}") == "0");
    CHECK(session.display("#{cursor_flag}") == "1");
    CHECK_FALSE(has(session.screen(), "xtel top"));
}

}  // namespace

TEST_CASE("xtel top under tmux shows running agents' bandwidth and the exact bytes they moved",
          "[top]") {
    if (std::string_view(XTEL_TMUX).empty()) {
        WARN("SKIPPED: tmux was not found when configuring (Debian package tmux)");
        return;
    }
    const temp_dir dir, out;
    constexpr std::uint64_t pass_bytes = 4 * mib;
    prom_it::child_process demo(
        demo_options(dir.path(), {"--name", "steady", "--op", "write", "--total", "4M", "--block",
                                  "64K", "--duration", "4", "--linger", "120"}));
    const tmux_session session(top_command(dir.path(), out.path()), 160, 40);

    // While the demo transfers: the initiator live, with a bandwidth and a latency.
    const auto running = session.wait_for(
        [](const std::string& s) {
            const auto row = row_of(s, "steady-initiator");
            return row.size() > 8 && row[3] == "live" && row[4] != "0B" && row[4] != "-";
        },
        20s);
    INFO("screen while running:\n" << running);
    const auto row = row_of(running, "steady-initiator");
    REQUIRE(row.size() > 8);
    CHECK(row[4].ends_with("B"));
    CHECK(row[6] != "0");  // transfers per second
    CHECK(row[7] != "-");  // p50
    CHECK(row[8] != "-");  // p99
    CHECK(has(running, "agents 2: 2 live, 0 closed, 0 dead"));

    // Once the passes are done (the demo lingers, its agents live): the exact bytes of every
    // pass, and no bandwidth.
    const auto done = demo.read_line("passes in", 60s);
    INFO("demo:\n" << demo.output());
    REQUIRE(done);
    // "initiator: N passes in S s, R bytes read, W written, ...": the last pass may have
    // stopped part-way at --duration, so W, not N passes of 4 MiB.
    const auto read_at = done->find(" bytes read, ");
    REQUIRE(read_at != std::string::npos);
    const auto written = std::stoull(done->substr(read_at + 13));
    CHECK(written >= pass_bytes);
    // The target's buffer is registered still; the initiator's, deregistered after its passes.
    const auto total =
        fmt::format("({} B)  rx 0B (0 B)  mem 4.00MiB ({} B)  tx/s 0B", written, pass_bytes);
    const auto idle = session.wait_for([&](const std::string& s) { return has(s, total); }, 15s);
    INFO("screen once done:\n" << idle);
    CHECK(has(idle, total));
    CHECK(row_of(idle, "steady-initiator").at(3) == "live");

    // Keys: the next sort column, a filter typed and cleared.
    session.keys({"s"});
    CHECK(has(session.wait_for([](const std::string& s) { return has(s, "sort rx"); }, 5s),
              "sort rx"));
    session.keys({"f"});
    session.keys({"-l", "steady-t"});
    session.keys({"Enter"});
    const auto filtered = session.wait_for(
        [](const std::string& s) { return has(s, "filter 'steady-t' (1 hidden)"); }, 5s);
    INFO("filtered:\n" << filtered);
    CHECK(row_of(filtered, "steady-initiator").empty());
    CHECK_FALSE(row_of(filtered, "steady-target").empty());
    session.keys({"c"});
    CHECK_FALSE(
        row_of(session.wait_for(
                   [](const std::string& s) { return !row_of(s, "steady-initiator").empty(); }, 5s),
               "steady-initiator")
            .empty());

    session.keys({"q"});
    check_terminal_given_back(session, out.path());
}

TEST_CASE(
    "xtel top under tmux fits a narrow window follows a resize and gives the terminal "
    "back on a signal",
    "[top]") {
    if (std::string_view(XTEL_TMUX).empty()) {
        WARN("SKIPPED: tmux was not found when configuring (Debian package tmux)");
        return;
    }
    const std::string stop = GENERATE("SIGTERM", "SIGINT", "Ctrl-C");
    INFO(stop);
    const temp_dir dir, out;
    run_demo(dir.path(), {"--name", "narrow", "--op", "write", "--total", "1M", "--block", "64K"});
    const tmux_session session(top_command(dir.path(), out.path()), 60, 12);

    const auto narrow =
        session.wait_for([](const std::string& s) { return has(s, "narrow-initiator"); }, 10s);
    INFO("narrow:\n" << narrow);
    CHECK(has(narrow, "AGENT"));
    CHECK_FALSE(has(narrow, "XFERS/s"));  // past the 60th column
    session.tmux({"resize-window", "-x", "150", "-y", "30"});
    const auto wide = session.wait_for([](const std::string& s) { return has(s, "XFERS/s"); }, 10s);
    INFO("wide:\n" << wide);
    CHECK(has(wide, "XFERS/s"));
    CHECK(row_of(wide, "narrow-initiator").at(10) == "1.00MiB");

    if (stop == "Ctrl-C") {
        session.keys({"C-c"});
    } else {
        const auto shell = static_cast<pid_t>(std::stol(session.display("#{pane_pid}")));
        const pid_t top = child_named(shell, "xtel");
        REQUIRE(top > 0);
        ::kill(top, stop == "SIGTERM" ? SIGTERM : SIGINT);
    }
    check_terminal_given_back(session, out.path());
}

}  // namespace top_test
