// Every program and script a user runs answers --help with its usage on stdout and exit status
// 0, and a script does so without installing or building anything; bad usage is one line on
// stderr and the documented usage status.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "prometheus_support.hpp"
#include "test_util.hpp"

namespace cli_help_test {

namespace {

namespace fs = std::filesystem;
using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::run_result;
using xtel_test::temp_dir;

const fs::path source_dir = XTEL_SOURCE_DIR;

std::size_t lines_in(const std::string& s) {
    return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

/// Who runs a script: the user `id -u` names, and whether sudo is on PATH.
enum class runner {
    as_is,              ///< the test's own user; sudo a stub
    root_without_sudo,  ///< uid 0 and no sudo anywhere on PATH: a container's usual state
    user_with_sudo,     ///< uid 1000 and sudo a stub
};

/// Where a script runs: a PATH whose apt-get, sudo, dpkg-query (which finds no package
/// installed), cmake, ninja, ctest, cpack and npm only record that they were called (cmake
/// creating the directory its -B names, as it would), and build directories that do not exist
/// yet. A script that installs or builds anything leaves a trace in `calls` or creates `build`.
class script_sandbox {
  public:
    explicit script_sandbox(runner who = runner::as_is) : who_(who) {
        fs::create_directories(dir_ / "bin");
        for (const char* tool :
             {"apt-get", "sudo", "dpkg-query", "cmake", "ninja", "ctest", "cpack", "npm"}) {
            if (who == runner::root_without_sudo && std::string_view(tool) == "sudo") {
                continue;
            }
            write_tool(tool, std::string("echo \"") + tool + " $*\" >>'" + calls().string() +
                                 "'\n" +
                                 (std::string_view(tool) == "cmake"
                                      ? "while [ $# -gt 1 ]; do [ \"$1\" = -B ] && mkdir -p "
                                        "\"$2\"; shift; done\n"
                                      : ""));
        }
        if (who != runner::as_is) {
            write_tool("id", std::string("[ \"$*\" = -u ] && exec echo ") +
                                 (who == runner::root_without_sudo ? "0" : "1000") + "\nexec " +
                                 find_on_path("id") + " \"$@\"\n");
        }
    }

    fs::path calls() const { return dir_ / "calls"; }
    fs::path build() const { return dir_ / "build"; }

    /// Puts this build's xfer_demo and telemetry_reader where scripts/demo builds them, so that
    /// it runs them after its (recorded) build.
    void place_demo_programs() const {
        const auto examples = build() / "release" / "examples";
        fs::create_directories(examples / "xfer_demo");
        fs::create_directories(examples / "cpp");
        fs::create_symlink(XTEL_XFER_DEMO, examples / "xfer_demo" / "xfer_demo");
        fs::create_symlink(XTEL_TELEMETRY_READER, examples / "cpp" / "telemetry_reader");
    }

    /// Runs `script` (a path under scripts/) with `args`; also how long it took.
    run_result run(const fs::path& script,
                   const std::vector<std::string>& args,
                   std::chrono::duration<double>& took) const {
        std::vector<std::string> argv = environment();
        argv.push_back(script.string());
        argv.insert(argv.end(), args.begin(), args.end());
        const auto started = std::chrono::steady_clock::now();
        auto r = xtel_test::run(argv);
        took = std::chrono::steady_clock::now() - started;
        return r;
    }

    /// Runs one line of shell as a reader types it, at the root of the source tree.
    run_result run_line(const std::string& line) const {
        std::vector<std::string> argv = environment();
        argv.insert(argv.end(), {"bash", "-c", "cd '" + source_dir.string() + "' && " + line});
        return xtel_test::run(argv);
    }

  private:
    void write_tool(const std::string& name, const std::string& body) const {
        const auto path = dir_ / "bin" / name;
        std::ofstream(path) << "#!/bin/sh\n" << body;
        fs::permissions(path, fs::perms::owner_all);
    }

    /// The first `name` on the test's PATH.
    static std::string find_on_path(std::string_view name) {
        std::istringstream dirs(path_of_test());
        for (std::string d; std::getline(dirs, d, ':');) {
            if (!d.empty() && ::access((fs::path(d) / name).c_str(), X_OK) == 0) {
                return (fs::path(d) / name).string();
            }
        }
        return std::string(name);
    }

    static std::string path_of_test() {
        const char* path = std::getenv("PATH");
        return path != nullptr ? path : "/usr/bin:/bin";
    }

    /// The test's PATH with sudo taken out: every program of its directories but sudo, linked
    /// into one directory, the first of a name winning as on PATH.
    std::string path_without_sudo() const {
        const auto tools = dir_ / "tools";
        fs::create_directories(tools);
        std::istringstream dirs(path_of_test());
        for (std::string d; std::getline(dirs, d, ':');) {
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(d.empty() ? "." : d, ec)) {
                const auto name = e.path().filename();
                if (name != "sudo" && !fs::exists(tools / name) &&
                    ::access(e.path().c_str(), X_OK) == 0) {
                    fs::create_symlink(e.path(), tools / name, ec);
                }
            }
        }
        return tools.string();
    }

    /// `env` with the sandbox's PATH and build directories: what every run starts with.
    std::vector<std::string> environment() const {
        const std::string rest =
            who_ == runner::root_without_sudo ? path_without_sudo() : path_of_test();
        return {"env", "PATH=" + (dir_ / "bin").string() + ":" + rest,
                "XTEL_BUILD_DIR=" + build().string(), "XTEL_BENCH_BUILD_DIR=" + build().string()};
    }

    temp_dir dir_;
    runner who_;
};

/// The executables under scripts/: what a user runs.
std::vector<std::string> script_names() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(source_dir / "scripts")) {
        if (e.is_regular_file() &&
            (e.status().permissions() & fs::perms::owner_exec) != fs::perms::none) {
            names.push_back(e.path().filename().string());
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

/// What each script's usage must name: its arguments and the environment it reads.
std::vector<std::string_view> words_for(std::string_view script) {
    if (script == "test") {
        return {"CTEST ARGUMENT", "XTEL_TEST_QUICK", "XTEL_STRESS_SECONDS",
                "XTEL_BUILD_DIR", "Exit status",     "64 bad usage"};
    }
    if (script == "demo") {
        // xfer_demo's options, read from its source.
        return {"XTEL_BUILD_DIR",   "NIXL_TELEMETRY_BUFFER_SIZE", "--total SIZE",
                "--block SIZE",     "--linger SECONDS",           "Exit status",
                "scripts/deps demo"};
    }
    if (script == "bench") {
        return {"--repetitions N",           "--filter REGEX", "--out FILE", "XTEL_BENCH_BUILD_DIR",
                "XTEL_BENCH_PAIRED_SECONDS", "64 bad"};
    }
    if (script == "fuzz") {
        return {"SECONDS", "TARGET", "XTEL_BUILD_DIR", "64 bad usage"};
    }
    if (script == "package") {
        return {"--out DIR", "libxtel-dev", "xtel-tools", "XTEL_BUILD_DIR", "64 bad usage"};
    }
    if (script == "deps") {
        return {"GROUP", "demo", "build", "bench", "test", "64 an unknown GROUP"};
    }
    return {};
}

}  // namespace

TEST_CASE("xfer_demo prints its usage on stdout and exits 0 wherever help is asked", "[cli]") {
    const auto args = GENERATE(std::vector<std::string>{"--help"}, std::vector<std::string>{"-h"},
                               std::vector<std::string>{"--role", "--help"},
                               std::vector<std::string>{"--total", "1", "--help", "--bogus"},
                               std::vector<std::string>{"--depth", "0", "-h"});
    std::vector<std::string> argv = {XTEL_XFER_DEMO};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = xtel_test::run(argv);
    INFO(args.back() << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.starts_with("Usage: xfer_demo"));
    for (const char* word : {"--role",
                             "--metadata",
                             "--total",
                             "--block",
                             "--op",
                             "--depth",
                             "--seed",
                             "--timeout",
                             "--duration",
                             "--name",
                             "--target-name",
                             "--initiator-name",
                             "--request-id-prefix",
                             "--target-memory",
                             "--linger",
                             "--help",
                             "NIXL_TELEMETRY_ENABLE",
                             "NIXL_TELEMETRY_EXPORTER",
                             "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH",
                             "NIXL_TELEMETRY_BUFFER_SIZE",
                             "Exit status: 0",
                             "2 bad usage"}) {
        CHECK(r.out.find(word) != std::string::npos);
    }
}

TEST_CASE("xfer_demo answers bad usage with one stderr line and exit status 2", "[cli]") {
    const auto [args, names] = GENERATE(
        std::pair<std::vector<std::string>, std::string>{{"--depth", "0"}, "--depth '0'"},
        std::pair<std::vector<std::string>, std::string>{{"--bogus", "1"},
                                                         "'--bogus' is not an option"},
        std::pair<std::vector<std::string>, std::string>{{"--bogus"}, "'--bogus' is not an option"},
        std::pair<std::vector<std::string>, std::string>{{"extra"}, "'extra' is not an option"},
        std::pair<std::vector<std::string>, std::string>{{"--depth", "4", "--seed"},
                                                         "--seed needs a value"},
        std::pair<std::vector<std::string>, std::string>{{"--role"}, "--role needs a value"},
        std::pair<std::vector<std::string>, std::string>{{"--total", "1x"}, "--total '1x'"});
    std::vector<std::string> argv = {XTEL_XFER_DEMO};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = xtel_test::run(argv);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(lines_in(r.err) == 1);
    CHECK(r.err.find(names) != std::string::npos);
    CHECK(r.err.find("--help lists the options") != std::string::npos);
}

TEST_CASE("every program prints the version CMake's project names for --version", "[cli]") {
    const auto [argv, name] = GENERATE(
        std::make_pair(std::vector<std::string>{XTEL_XFER_DEMO, "--version"}, "xfer_demo"),
        std::make_pair(std::vector<std::string>{XTEL_XFER_DEMO, "--depth", "2", "--version"},
                       "xfer_demo"),
        std::make_pair(std::vector<std::string>{XTEL_EXPORTER, "--version"}, "xtel-exporter"),
        std::make_pair(
            std::vector<std::string>{XTEL_EXPORTER, "--dir", "/nonexistent", "--version"},
            "xtel-exporter"),
        std::make_pair(std::vector<std::string>{XTEL_TOP, "--version"}, "xtel"),
        std::make_pair(std::vector<std::string>{XTEL_TELEMETRY_READER, "--version"},
                       "telemetry_reader"),
        std::make_pair(std::vector<std::string>{XTEL_PYTHON, XTEL_PYTHON_READER, "--version"},
                       "telemetry_reader.py"));
    const auto r = xtel_test::run(argv);
    INFO(argv.front() << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out == std::string(name) + " " + XTEL_PROJECT_VERSION + "\n");
}

TEST_CASE("the readme's programs answer --help on stdout and refuse an argument", "[cli]") {
    const auto program =
        GENERATE(std::string(XTEL_MINIMAL_AGENT), std::string(XTEL_MINIMAL_PIPELINE));
    const auto help = xtel_test::run({program, "--help"});
    INFO(program << "\n" << help.out << help.err);
    CHECK(help.exit_code == 0);
    CHECK(help.err.empty());
    CHECK(help.out == "usage: " + program + " (no options; NIXL_TELEMETRY_* configure it)\n");
    const auto bad = xtel_test::run({program, "--bogus"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.empty());
    CHECK(bad.err == help.out);
}

TEST_CASE("XTEL_LOG_LEVEL is matched ignoring case and a value it cannot be is said once",
          "[cli]") {
    // minimal_agent logs at info as its agents start: "loud" keeps info, with one warning.
    const auto loud = xtel_test::run(
        {"env", "XTEL_LOG_LEVEL=loud", "NIXL_TELEMETRY_ENABLE=n", XTEL_MINIMAL_AGENT});
    INFO(loud.err);
    CHECK(loud.exit_code == 0);
    CHECK(loud.err.find("xtel: warning: XTEL_LOG_LEVEL='loud' is invalid: expected error, "
                        "warning, info or debug (in any case); logging at info\n") == 0);
    CHECK(lines_in(loud.err) == 1);
    // A near miss gets a guess; a level in capitals is that level.
    const auto near = xtel_test::run(
        {"env", "XTEL_LOG_LEVEL=wraning", "NIXL_TELEMETRY_ENABLE=n", XTEL_MINIMAL_AGENT});
    CHECK(near.err.find("XTEL_LOG_LEVEL='wraning' is invalid (did you mean 'warning'?)") !=
          std::string::npos);
    const auto quiet = xtel_test::run(
        {"env", "XTEL_LOG_LEVEL=ERROR", "NIXL_TELEMETRY_ENABLE=n", XTEL_MINIMAL_AGENT});
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.err.empty());
}

TEST_CASE("xtel-exporter's log lines start with its own name and their level, once", "[cli]") {
    // They read "xtel: info: xtel-exporter: ...": the library's name before the program's.
    const temp_dir dir;
    child_process exporter(
        spawn_options{{XTEL_EXPORTER, "--dir", dir.path().string(), "--listen", "127.0.0.1:0"},
                      {{"XTEL_LOG_LEVEL", "loud"}}});
    REQUIRE(exporter.read_line("serving http://", std::chrono::seconds(10)));
    const std::string out = exporter.output();
    INFO(out);
    // The library's complaint, written before anything else, names the program too.
    CHECK(out.starts_with("xtel-exporter: warning: XTEL_LOG_LEVEL='loud' is invalid: "));
    CHECK(xtel_test::count_of(out, "xtel: ") == 0);
    CHECK(xtel_test::count_of(out, "xtel-exporter: ") == lines_in(out));
    CHECK(xtel_test::count_of(out, "\nxtel-exporter: ") + 1 == lines_in(out));
}

TEST_CASE("xtel-exporter prints its usage on stdout and nothing on stderr", "[cli]") {
    const auto flag = GENERATE("--help", "-h");
    const auto r = xtel_test::run({XTEL_EXPORTER, flag});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.starts_with("Usage: xtel-exporter"));
    CHECK(r.out.find("--listen HOST:PORT") != std::string::npos);
    for (const char* word :
         {"--allow-uid UID|NAME[,...]", "--max-file-bytes BYTES", "--max-series N"}) {
        CHECK(r.out.find(word) != std::string::npos);
    }
}

TEST_CASE(
    "xtel-exporter refuses at start in one line with exit status 64 a push URL or header it "
    "could never send",
    "[cli]") {
    struct bad_start {
        std::vector<std::string> args;
        std::vector<std::pair<std::string, std::string>> env;
        std::string said;
    };
    // Each was accepted at start and then retried for ever ("URL using bad/illegal format"),
    // or blamed the header's name and printed its CR/LF raw.
    const auto c = GENERATE(
        bad_start{{"--remote-write", "http://"}, {}, "--remote-write='http://' is invalid: "},
        bad_start{{"--remote-write", "http://127.0.0.1:1 x"}, {}, "; byte 18 is a space"},
        bad_start{
            {"--remote-write", "ftp://h/write"}, {}, "does not start with http:// or https://"},
        bad_start{{},
                  {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1 x"}},
                  "OTEL_EXPORTER_OTLP_ENDPOINT='http://127.0.0.1:1 x' is invalid: "},
        bad_start{{},
                  {{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http:///v1/metrics"}},
                  "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT='http:///v1/metrics' is invalid: "},
        bad_start{{"--otlp-endpoint", "https://:4318"}, {}, "; it has no host"},
        bad_start{{"--otlp-endpoint", "http://c:4318", "--otlp-header", "a=b\r\nX-Evil: 1"},
                  {},
                  "--otlp-header='a=b\\r\\nX-Evil: 1' is invalid: the value of header 'a' "
                  "('b\\r\\nX-Evil: 1') holds CR, LF or NUL"},
        bad_start{{},
                  {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                   {"OTEL_EXPORTER_OTLP_HEADERS", "a=b%0D%0AX-Evil:%201"}},
                  "the value of header 'a' ('b\\r\\nX-Evil: 1') holds CR, LF or NUL"},
        // Accepted, unread, while no OTLP endpoint was set.
        bad_start{{"--otlp-interval", "abc"},
                  {},
                  "--otlp-interval='abc' is invalid: expected a whole number from 1 to 3600"},
        bad_start{{"--otlp-interval", "0"},
                  {},
                  "--otlp-interval='0' is invalid: expected a whole number from 1 to 3600"},
        bad_start{{"--otlp-protocol", "grpc"}, {}, "--otlp-protocol='grpc' is invalid: "},
        // A mistyped flag got the list of flags, without the guess a mistyped value gets.
        bad_start{{"--remote-writ", "http://h/w"},
                  {},
                  "'--remote-writ' is not an option (did you mean '--remote-write'?): expected "
                  "--dir, "},
        bad_start{{"--otlp-intreval=5"}, {}, "(did you mean '--otlp-interval'?)"});
    const temp_dir dir;
    std::vector<std::string> argv = {XTEL_EXPORTER, "--dir", dir.path().string(), "--listen",
                                     "127.0.0.1:0"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    child_process exporter(
        spawn_options{argv,
                      c.env,
                      {},
                      {},
                      {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                       "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
                       "OTEL_METRICS_EXPORTER"}});
    exporter.read_line("no such line", std::chrono::seconds(5));
    INFO(exporter.output());
    CHECK(exporter.wait(std::chrono::seconds(5)) == 64);
    CHECK(lines_in(exporter.output()) == 1);
    CHECK(exporter.output().starts_with("xtel-exporter: "));
    CHECK(exporter.output().find(c.said) != std::string::npos);
    CHECK(exporter.output().find('\r') == std::string::npos);
}

TEST_CASE("xtel-exporter says once at start that its directory holds no node file, and serves",
          "[cli]") {
    // An empty or mistyped --dir served 0 agents and logged nothing.
    const temp_dir dir;
    const bool with_file = GENERATE(false, true);
    if (with_file) {
        std::ofstream(dir.path() / "agent.metrics") << "";
    }
    child_process exporter(
        spawn_options{{XTEL_EXPORTER, "--dir", dir.path().string(), "--listen", "127.0.0.1:0"}});
    REQUIRE(exporter.read_line("serving http://", std::chrono::seconds(10)));
    const std::string out = exporter.output();
    INFO(out);
    const std::string warning = "xtel-exporter: warning: --dir " + dir.path().string() +
                                " holds no node file (<agent name>.metrics) yet: no agent is "
                                "served until one appears there (an agent writes one with "
                                "NIXL_TELEMETRY_EXPORTER=node and "
                                "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" +
                                dir.path().string() + ")\n";
    CHECK(xtel_test::count_of(out, warning) == (with_file ? 0 : 1));
    CHECK_FALSE(exporter.exited());
}

TEST_CASE("xtel and xtel top print their usage on stdout and exit 0 wherever help is asked",
          "[cli][top]") {
    const auto args =
        GENERATE(std::vector<std::string>{"--help"}, std::vector<std::string>{"-h"},
                 std::vector<std::string>{"top", "--help"}, std::vector<std::string>{"top", "-h"},
                 std::vector<std::string>{"top", "--sort", "bogus", "--help"},
                 std::vector<std::string>{"top", "--dir", "/no/such", "-h"});
    std::vector<std::string> argv = {XTEL_TOP};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = xtel_test::run(argv);
    INFO(args.back() << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    if (args.front() == "top") {
        CHECK(r.out.starts_with("Usage: xtel top"));
        for (const char* word :
             {"--dir DIR", "--sort COLUMN", "--reverse", "--filter GLOB", "--interval SECONDS",
              "--stale-ttl SECONDS", "--once", "--allow-uid UID|NAME[,...]", "--help", "tx-total",
              "Keys:", "Exit status"}) {
            CHECK(r.out.find(word) != std::string::npos);
        }
    } else {
        CHECK(r.out.starts_with("Usage: xtel COMMAND"));
        CHECK(r.out.find("top") != std::string::npos);
    }
}

TEST_CASE("xtel and xtel top answer bad usage with one stderr line and exit status 64",
          "[cli][top]") {
    const auto [args, names] = GENERATE(
        std::pair<std::vector<std::string>, std::string>{{}, "a command is needed"},
        std::pair<std::vector<std::string>, std::string>{{"bogus"}, "'bogus' is not a command"},
        std::pair<std::vector<std::string>, std::string>{{"top", "--bogus"}, "'--bogus'"},
        std::pair<std::vector<std::string>, std::string>{{"top", "--sort"}, "--sort needs a value"},
        std::pair<std::vector<std::string>, std::string>{{"top", "--interval", "0"},
                                                         "--interval='0'"},
        std::pair<std::vector<std::string>, std::string>{{"top", "--once=1"},
                                                         "--once takes no value"},
        std::pair<std::vector<std::string>, std::string>{
            {"top", "--allow-uid", "xtel-no-such-user"}, "--allow-uid='xtel-no-such-user'"});
    std::vector<std::string> argv = {XTEL_TOP};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = xtel_test::run(argv);
    INFO(r.err);
    CHECK(r.exit_code == 64);
    CHECK(r.out.empty());
    CHECK(lines_in(r.err) == 1);
    CHECK(r.err.find(names) != std::string::npos);
    CHECK(r.err.find("--help lists") != std::string::npos);
}

TEST_CASE("every script prints its usage on stdout without installing or building", "[cli]") {
    const auto names = script_names();
    REQUIRE(std::find(names.begin(), names.end(), "test") != names.end());
    REQUIRE(std::find(names.begin(), names.end(), "fuzz") != names.end());
    for (const auto& name : names) {
        for (const char* flag : {"--help", "-h"}) {
            const script_sandbox box;
            std::chrono::duration<double> took{};
            const auto r = box.run(source_dir / "scripts" / name, {flag}, took);
            INFO("scripts/" << name << " " << flag << "\n" << r.out << r.err);
            CHECK(r.exit_code == 0);
            CHECK(r.err.empty());
            CHECK(r.out.starts_with("Usage: scripts/" + name));
            for (const auto word : words_for(name)) {
                CHECK(r.out.find(word) != std::string::npos);
            }
            CHECK(took.count() < 3.0);
            CHECK(xtel_test::read_file(box.calls()).empty());
            CHECK_FALSE(fs::exists(box.build()));
        }
    }
}

TEST_CASE("scripts answer help given after their other arguments", "[cli]") {
    const auto [name, args] = GENERATE(
        std::pair<std::string, std::vector<std::string>>{"fuzz", {"10", "config", "-h"}},
        std::pair<std::string, std::vector<std::string>>{"test", {"-R", "x", "--help"}},
        std::pair<std::string, std::vector<std::string>>{"demo", {"--total", "1G", "-h"}},
        std::pair<std::string, std::vector<std::string>>{"bench", {"--filter", "x", "-h"}});
    const script_sandbox box;
    std::chrono::duration<double> took{};
    const auto r = box.run(source_dir / "scripts" / name, args, took);
    INFO("scripts/" << name << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.starts_with("Usage: scripts/" + name));
    CHECK(xtel_test::read_file(box.calls()).empty());
    CHECK_FALSE(fs::exists(box.build()));
}

TEST_CASE("every script refuses a bad argument with one stderr line and exit 64 before it builds",
          "[cli]") {
    using args = std::vector<std::string>;
    const auto [name, argv, names] = GENERATE(
        std::make_tuple("demo", args{"--bogus", "1"}, "'--bogus' is not an option of xfer_demo"),
        std::make_tuple("demo", args{"extra"}, "'extra' is not an option of xfer_demo"),
        std::make_tuple("demo", args{"--block", "4K", "--total"}, "--total needs a value"),
        std::make_tuple("demo", args{"--notify", "--block"}, "--block needs a value"),
        std::make_tuple("demo", args{"--notify=1"}, "--notify takes no value"),
        std::make_tuple("demo", args{"--notify", "1M"}, "'1M' is not an option of xfer_demo"),
        std::make_tuple("bench", args{"--repetitions", "x"}, "--repetitions 'x' is invalid"),
        std::make_tuple("bench", args{"--repetitions"}, "--repetitions needs a value"),
        std::make_tuple("bench", args{"--bogus"}, "'--bogus' is not an argument"),
        std::make_tuple("test", args{"--bogus"}, "'--bogus' is not a ctest argument"),
        std::make_tuple("test", args{"-j", "2", "-R"}, "-R needs a value"),
        std::make_tuple("deps", args{"everything"}, "GROUP 'everything' is invalid"),
        std::make_tuple("package", args{"--out"}, "--out needs a directory"),
        std::make_tuple("package", args{"extra"}, "'extra' is not an argument"));
    const script_sandbox box;
    std::chrono::duration<double> took{};
    const auto r = box.run(source_dir / "scripts" / name, argv, took);
    INFO("scripts/" << name << "\n" << r.out << r.err);
    CHECK(r.exit_code == 64);
    CHECK(r.out.empty());
    CHECK(lines_in(r.err) == 1);
    CHECK(r.err.starts_with(std::string("scripts/") + name + ": "));
    CHECK(r.err.find(names) != std::string::npos);
    CHECK(r.err.find("--help lists") != std::string::npos);
    CHECK(xtel_test::read_file(box.calls()).empty());
    CHECK_FALSE(fs::exists(box.build()));
}

TEST_CASE("scripts/demo passes --notify, the option without a value, on to xfer_demo", "[cli]") {
    // It was refused: "--notify needs a value", as though every option took one.
    const script_sandbox box;
    box.place_demo_programs();
    std::chrono::duration<double> took{};
    const auto r = box.run(source_dir / "scripts" / "demo",
                           {"--notify", "--total", "1M", "--op", "write"}, took);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    // 1 MiB in blocks of 64 KiB: 16 writes, each notified.
    CHECK(r.out.find("initiator: notified 'demo_target' of 16 transfers, 1048576 bytes") !=
          std::string::npos);
    CHECK(r.out.find("one per transfer") != std::string::npos);
}

TEST_CASE("the readme's first commands run as written as root without sudo and as a user with sudo",
          "[cli][readme]") {
    // The README began `sudo scripts/demo`: "sudo: command not found", exit status 127, on a
    // root machine without sudo, before the script (which uses sudo only when not root) ran.
    const std::string readme = xtel_test::read_file(source_dir / "README.md");
    const auto open = readme.find("```sh\n");
    REQUIRE(open != std::string::npos);
    const auto close = readme.find("```\n", open + 6);
    REQUIRE(close != std::string::npos);
    std::vector<std::string> lines;
    std::istringstream block(readme.substr(open + 6, close - open - 6));
    for (std::string line; std::getline(block, line);) {
        lines.push_back(line);
    }
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].starts_with("scripts/demo "));
    CHECK(lines[1].starts_with("scripts/test "));
    const auto who = GENERATE(runner::root_without_sudo, runner::user_with_sudo);
    for (const auto& line : lines) {
        const script_sandbox box(who);
        box.place_demo_programs();  // the demo runs them once its build is recorded
        const auto r = box.run_line(line);
        const std::string calls = xtel_test::read_file(box.calls());
        INFO(line << "\n" << calls << r.out << r.err);
        CHECK(r.exit_code == 0);
        // Every package missing (dpkg-query finds none): installed, through sudo unless root.
        const std::string install =
            who == runner::user_with_sudo ? "sudo apt-get install -y " : "apt-get install -y ";
        CHECK(calls.starts_with("dpkg-query "));
        CHECK(xtel_test::count_of(calls, install) == 1);
        CHECK(xtel_test::count_of(calls, "sudo ") == (who == runner::user_with_sudo ? 2 : 0));
        CHECK(calls.find("cmake --build ") != std::string::npos);
        if (line.starts_with("scripts/demo")) {
            CHECK(r.out.find("initiator: verified 67108864 bytes read") != std::string::npos);
        }
    }
}

TEST_CASE(
    "scripts/demo, scripts/test and scripts/package each build in their folder under "
    "XTEL_BUILD_DIR",
    "[cli]") {
    // scripts/demo took XTEL_BUILD_DIR for its build directory itself, the others for the one
    // their folders are in.
    const auto [name, folder] =
        GENERATE(std::make_pair("demo", "release"), std::make_pair("test", "test"),
                 std::make_pair("package", "package"));
    const script_sandbox box;
    std::chrono::duration<double> took{};
    const auto r = box.run(source_dir / "scripts" / name, {}, took);
    const std::string calls = xtel_test::read_file(box.calls());
    INFO("scripts/" << name << "\n" << calls << r.out << r.err);
    CHECK(calls.find("cmake -S " + source_dir.string() + " -B " + (box.build() / folder).string() +
                     " ") != std::string::npos);
    // scripts/test's five stages: the tests, two sanitizer builds, TSan, and without push.
    CHECK(xtel_test::count_of(calls, "cmake -S ") == (std::string_view(name) == "test" ? 5 : 1));
}

TEST_CASE("scripts/fuzz refuses a bad argument with one stderr line and exit status 64", "[cli]") {
    const auto [args, names] = GENERATE(
        std::pair<std::vector<std::string>, std::string>{{"abc"}, "SECONDS 'abc'"},
        std::pair<std::vector<std::string>, std::string>{{"--seconds", "5"}, "SECONDS '--seconds'"},
        std::pair<std::vector<std::string>, std::string>{{"5", "no_such"}, "TARGET 'no_such'"});
    const script_sandbox box;
    std::chrono::duration<double> took{};
    const auto r = box.run(source_dir / "scripts" / "fuzz", args, took);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 64);
    CHECK(r.out.empty());
    CHECK(lines_in(r.err) == 1);
    CHECK(r.err.find(names) != std::string::npos);
    CHECK(r.err.find("--help lists the arguments") != std::string::npos);
    CHECK(xtel_test::read_file(box.calls()).empty());
    CHECK_FALSE(fs::exists(box.build()));
}

}  // namespace cli_help_test
