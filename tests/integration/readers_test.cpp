#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "test_util.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace readers_test {

namespace {

const std::string cpp_reader = XTEL_TELEMETRY_READER;
const std::string py_reader = XTEL_PYTHON_READER;
const std::string python = XTEL_PYTHON;

xtel::config buffer_config(const xtel_test::temp_dir& dir, std::size_t capacity) {
    xtel::config cfg;
    cfg.enabled = true;
    cfg.buffer_size = capacity;
    cfg.output_path = dir.path().string();
    return cfg;
}

/// Known events, written through the real pipeline and buffer exporter.
void write_known_events(const xtel_test::temp_dir& dir, std::size_t capacity = 1024) {
    xtel::buffer_telemetry t(buffer_config(dir, capacity), "agent");
    t.set(xtel::category::memory, xtel::names::agent_memory_registered, 4096);
    t.record_transfer(xtel::direction::tx, 1'736'951'425'123'456, 1'048'576, 1, 12, 345);
    t.record_at(1'736'951'425'200'000, xtel::category::error, "odd \"name\"\\", 7);
}

xtel_test::run_result read_cpp(const std::filesystem::path& p, bool json = false) {
    std::vector<std::string> args{cpp_reader, p.string()};
    if (json) {
        args.push_back("--json");
    }
    return xtel_test::run(args);
}

xtel_test::run_result read_py(const std::filesystem::path& p, bool json = false) {
    std::vector<std::string> args{python, py_reader, "--telemetry_path", p.string()};
    if (json) {
        args.push_back("--json");
    }
    return xtel_test::run(args);
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) {
        ++n;
    }
    return n;
}

/// A reader program started in the background, its output going to files in `dir`.
struct child {
    pid_t pid = -1;
    std::filesystem::path out;
    std::filesystem::path err;
};

child spawn(const std::vector<std::string>& argv,
            const xtel_test::temp_dir& dir,
            const std::string& name) {
    // Names of their own, so that a wait for output never sees an earlier child's.
    static int spawned = 0;
    const auto base = fmt::format("{}.{}", name, ++spawned);
    child c{-1, dir / (base + ".out"), dir / (base + ".err")};
    c.pid = xtel_test::spawn(argv, c.out, c.err);
    return c;
}

struct ended {
    bool timed_out = false;
    int exit_code = -1;  ///< 128 + signal when a signal ended it
    std::string out;
    std::string err;
};

/// Waits for the child to end; past `limit` it is killed and the result says it timed out, so
/// that a hang fails the test instead of hanging the test run.
ended wait_for(const child& c, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    ended e;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(c.pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            e.timed_out = true;
            ::kill(c.pid, SIGKILL);
            ::waitpid(c.pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    e.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    e.out = xtel_test::read_file(c.out);
    e.err = xtel_test::read_file(c.err);
    return e;
}

std::vector<std::string> cpp_args(const std::filesystem::path& p,
                                  std::vector<std::string> options = {}) {
    std::vector<std::string> a{cpp_reader, p.string()};
    a.insert(a.end(), options.begin(), options.end());
    return a;
}

std::vector<std::string> py_args(const std::filesystem::path& p,
                                 std::vector<std::string> options = {}) {
    std::vector<std::string> a{python, py_reader, "--telemetry_path", p.string()};
    a.insert(a.end(), options.begin(), options.end());
    return a;
}

/// Both programs with the same options, for tests that hold each to the same behaviour.
struct program {
    const char* name;
    std::vector<std::string> (*args)(const std::filesystem::path&, std::vector<std::string>);
};
const program programs[] = {{"cpp", cpp_args}, {"py", py_args}};

std::size_t lines_in(const std::filesystem::path& f) {
    std::ifstream in(f);
    return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

/// Waits until the file holds at least `n` lines; false after 20 s.
bool wait_for_lines(const std::filesystem::path& f, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (lines_in(f) < n) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

/// The version-2 writer holds LOCK_EX on its file for its whole life, and a following reader
/// takes a free lock for a dead writer. The mapping writer that came before took no lock: this
/// takes it in its stead while it is free, and is harmless when the writer holds it already.
class writer_lock {
  public:
    explicit writer_lock(const std::filesystem::path& p)
        : fd_(::open(p.c_str(), O_RDONLY | O_CLOEXEC)) {
        if (fd_ >= 0) {
            ::flock(fd_, LOCK_EX | LOCK_NB);
        }
    }
    ~writer_lock() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    writer_lock(const writer_lock&) = delete;
    writer_lock& operator=(const writer_lock&) = delete;

  private:
    int fd_;
};

void append_named(xtel::flight_recorder::writer& w, std::size_t n, std::uint64_t value) {
    std::vector<xtel::event> events(n);
    for (auto& e : events) {
        e.timestamp_us = 1'000'000;
        e.name = "followed";
        e.value = value;
    }
    w.append(events);
}

/// A version-2 file written byte by byte, header and slots as given.
struct raw_recorder {
    xtel::flight_recorder::file_header header{};
    std::vector<xtel::flight_recorder::slot> slots;

    explicit raw_recorder(std::uint64_t capacity) : slots(capacity) {
        namespace fr = xtel::flight_recorder;
        std::memcpy(header.magic, fr::magic, sizeof fr::magic);
        header.version = fr::format_version;
        header.header_size = fr::header_size;
        header.slot_size = fr::slot_size;
        header.event_size = sizeof(xtel::event);
        header.capacity = capacity;
        header.state = static_cast<std::uint32_t>(fr::writer_state::closed);
    }

    void save(const std::filesystem::path& p, std::size_t keep_slots) const {
        std::ofstream out(p, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(&header), sizeof header);
        out.write(reinterpret_cast<const char*>(slots.data()),
                  static_cast<std::streamsize>(keep_slots * sizeof(xtel::flight_recorder::slot)));
    }
};

/// Local time is what both readers print; UTC makes the expected text fixed.
struct utc_scope {
    xtel_test::scoped_env tz{"TZ", "UTC"};
};

}  // namespace

TEST_CASE("the C++ reader prints events in the NIXL format") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    write_known_events(dir);
    const auto r = read_cpp(dir / "agent");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("=== NIXL Telemetry Event ===\n"
                                      "Timestamp: 2025-01-15 14:30:25.123456\n"
                                      "Category: TRANSFER\n"
                                      "Event: agent_tx_bytes\n"
                                      "Value: 1048576\n"
                                      "Unit: bytes\n"
                                      "===========================\n"));
    CHECK_THAT(r.out, Catch::Contains("Category: MEMORY\nEvent: agent_memory_registered\nValue: "
                                      "4096\nUnit: bytes\n"));
    CHECK_THAT(r.out, Catch::Contains(
                          "Category: PERFORMANCE\nEvent: agent_xfer_time\nValue: 345\nUnit: us\n"));
    CHECK(count(r.out, "=== NIXL Telemetry Event ===") == 6);
    CHECK_THAT(r.err, Catch::Contains("6 events read, 0 missed"));
}

TEST_CASE("the C++ and Python readers print the same events, in text and in JSON") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    write_known_events(dir);
    const auto c = read_cpp(dir / "agent");
    const auto p = read_py(dir / "agent");
    REQUIRE(c.exit_code == 0);
    REQUIRE(p.exit_code == 0);
    CHECK(c.out == p.out);
    const auto cj = read_cpp(dir / "agent", true);
    const auto pj = read_py(dir / "agent", true);
    REQUIRE(cj.exit_code == 0);
    REQUIRE(pj.exit_code == 0);
    CHECK(cj.out == pj.out);
    CHECK_THAT(
        cj.out,
        Catch::Contains(
            "{\"timestamp_us\":1736951425123456,\"timestamp\":\"2025-01-15 14:30:25.123456\","
            "\"category\":\"TRANSFER\",\"event\":\"agent_tx_bytes\",\"value\":1048576,"
            "\"unit\":\"bytes\"}\n"));
    // The backslash is printed doubled (the name text), then escaped again for JSON.
    CHECK_THAT(cj.out, Catch::Contains("\"event\":\"odd \\\"name\\\"\\\\\\\\\""));
    CHECK(count(cj.out, "\n") == 6);
}

TEST_CASE("both readers say how many events were overwritten before they read them") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    {
        xtel::buffer_telemetry t(buffer_config(dir, 4), "agent");
        for (std::uint64_t i = 0; i < 10; ++i) {
            t.record_at(1'000'000 + i, xtel::category::custom, "n", i);
        }
    }
    for (const auto& r : {read_cpp(dir / "agent", true), read_py(dir / "agent", true)}) {
        REQUIRE(r.exit_code == 0);
        CHECK(r.out.rfind("{\"missed\":6}\n", 0) == 0);
        CHECK(count(r.out, "\"event\":\"n\"") == 4);
        CHECK_THAT(r.out, Catch::Contains("\"value\":9,\"unit\":null}"));
        CHECK_THAT(r.err, Catch::Contains("4 events read, 6 missed"));
    }
}

TEST_CASE("both readers refuse files that are not telemetry buffers with one line") {
    xtel_test::temp_dir dir;
    {
        std::ofstream(dir / "junk") << std::string(512, 'j');
        std::ofstream(dir / "short") << "XTEL";
    }
    struct bad {
        std::filesystem::path path;
        const char* reason;
    };
    const bad cases[] = {
        {dir / "missing", "cannot open"},
        {dir.path(), "is a directory"},
        {dir / "junk", "bad magic"},
        {dir / "short", "truncated"},
    };
    for (const auto& c : cases) {
        for (const auto& r : {read_cpp(c.path), read_py(c.path)}) {
            CAPTURE(c.path, r.err);
            CHECK(r.exit_code == 2);
            CHECK(r.out.empty());
            CHECK(count(r.err, "\n") == 1);
            CHECK_THAT(r.err, Catch::Contains(c.reason));
        }
    }
}

TEST_CASE("with --follow both readers print events as they arrive until interrupted") {
    xtel_test::temp_dir dir;
    xtel::flight_recorder::writer w(dir.path(), "agent", 64);
    writer_lock lock(w.path());
    const auto start_follower = [&](const std::vector<std::string>& argv,
                                    const std::filesystem::path& out) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            if (!std::freopen(out.c_str(), "w", stdout)) {
                ::_exit(126);
            }
            std::vector<char*> a;
            for (const auto& s : argv) {
                a.push_back(const_cast<char*>(s.c_str()));
            }
            a.push_back(nullptr);
            ::execvp(a[0], a.data());
            ::_exit(127);
        }
        return pid;
    };
    const pid_t c = start_follower(
        {cpp_reader, (dir / "agent").string(), "--follow", "--json", "--interval-ms", "10"},
        dir / "c.out");
    const pid_t p = start_follower({python, py_reader, "--telemetry_path", (dir / "agent").string(),
                                    "--follow", "--json", "--interval-ms", "10"},
                                   dir / "p.out");
    const auto lines = [](const std::filesystem::path& f) {
        std::ifstream in(f);
        return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
    };
    for (std::uint64_t batch = 0; batch < 5; ++batch) {
        std::vector<xtel::event> events(3);
        for (auto& e : events) {
            e.timestamp_us = 1'000'000;
            e.name = "followed";
            e.value = batch;
        }
        w.append(events);
        // Both followers must print the batch while still running.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while ((lines(dir / "c.out") < 3 * (batch + 1) || lines(dir / "p.out") < 3 * (batch + 1)) &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        REQUIRE(lines(dir / "c.out") == 3 * (batch + 1));
        REQUIRE(lines(dir / "p.out") == 3 * (batch + 1));
    }
    for (const pid_t pid : {c, p}) {
        ::kill(pid, SIGINT);
        int status = 0;
        ::waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 130);
    }
    std::ifstream cf(dir / "c.out"), pf(dir / "p.out");
    std::stringstream cs, ps;
    cs << cf.rdbuf();
    ps << pf.rdbuf();
    CHECK(cs.str() == ps.str());
}

TEST_CASE("both readers refuse a FIFO, a device and a directory at once") {
    xtel_test::temp_dir dir;
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    const std::pair<std::filesystem::path, const char*> cases[] = {
        {dir / "fifo", "is not a regular file"},
        {"/dev/null", "is not a regular file"},
        {dir.path(), "is a directory"},
    };
    for (const auto& [path, reason] : cases) {
        for (const auto& prog : programs) {
            for (const std::vector<std::string>& opts :
                 {std::vector<std::string>{}, std::vector<std::string>{"--follow"}}) {
                // Opening a FIFO without O_NONBLOCK would wait for a writer: 10 s is a hang.
                const auto r =
                    wait_for(spawn(prog.args(path, opts), dir, "r"), std::chrono::seconds(10));
                CAPTURE(prog.name, path, opts, r.err);
                CHECK_FALSE(r.timed_out);
                CHECK(r.exit_code == 2);
                CHECK(r.out.empty());
                CHECK(count(r.err, "\n") == 1);
                CHECK_THAT(r.err, Catch::Contains(reason));
            }
        }
    }
}

TEST_CASE("SIGINT and SIGTERM end a one-shot read of a huge ring with 130 and 143") {
    xtel_test::temp_dir dir;
    // 2^32 slots, 256 GiB, sparse: reading them all would take minutes.
    raw_recorder rec(1);
    rec.header.capacity = std::uint64_t{1} << 32;
    rec.header.write_seq = rec.header.capacity;
    rec.header.claim_seq = rec.header.capacity;
    rec.save(dir / "huge", 0);
    std::filesystem::resize_file(dir / "huge",
                                 xtel::flight_recorder::header_size +
                                     rec.header.capacity * xtel::flight_recorder::slot_size);
    for (const auto& prog : programs) {
        for (const std::vector<std::string>& opts :
             {std::vector<std::string>{}, std::vector<std::string>{"--json"}}) {
            for (const auto& [sig, status] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
                const auto c = spawn(prog.args(dir / "huge", opts), dir, "r");
                REQUIRE(wait_for_lines(c.out, 1));  // it is reading
                ::kill(c.pid, sig);
                const auto r = wait_for(c, std::chrono::seconds(10));
                CAPTURE(prog.name, opts, sig, r.err);
                CHECK_FALSE(r.timed_out);
                CHECK(r.exit_code == status);
                CHECK_THAT(r.err, Catch::Contains("events read"));
            }
        }
    }
}

TEST_CASE("SIGINT and SIGTERM end --follow with 130 and 143") {
    xtel_test::temp_dir dir;
    xtel::flight_recorder::writer w(dir.path(), "agent", 16);
    writer_lock lock(w.path());
    append_named(w, 2, 1);
    for (const auto& prog : programs) {
        for (const std::vector<std::string>& opts :
             {std::vector<std::string>{"--follow"},
              std::vector<std::string>{"--follow", "--json", "--interval-ms", "5000"}}) {
            for (const auto& [sig, status] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
                const auto c = spawn(prog.args(w.path(), opts), dir, "r");
                REQUIRE(wait_for_lines(c.out, 2));
                ::kill(c.pid, sig);
                // Even in the middle of a 5 s sleep between polls.
                const auto r = wait_for(c, std::chrono::seconds(3));
                CAPTURE(prog.name, opts, sig, r.err);
                CHECK_FALSE(r.timed_out);
                CHECK(r.exit_code == status);
                CHECK_THAT(r.err, Catch::Contains("2 events read, 0 missed"));
            }
        }
    }
}

TEST_CASE("with --follow the readers print the rest and exit 0 when the writer closes the file") {
    xtel_test::temp_dir dir;
    auto w = std::make_unique<xtel::flight_recorder::writer>(dir.path(), "agent", 16);
    writer_lock lock(w->path());
    append_named(*w, 2, 1);
    std::vector<child> followers;
    for (const auto& prog : programs) {
        followers.push_back(spawn(
            prog.args(w->path(), {"--follow", "--json", "--interval-ms", "10"}), dir, prog.name));
    }
    for (const auto& f : followers) {
        REQUIRE(wait_for_lines(f.out, 2));
    }
    append_named(*w, 3, 2);
    w.reset();  // marks the file closed, while the lock is still held
    for (const auto& f : followers) {
        const auto r = wait_for(f, std::chrono::seconds(10));
        CAPTURE(r.err);
        CHECK_FALSE(r.timed_out);
        CHECK(r.exit_code == 0);
        CHECK(count(r.out, "\"event\":\"followed\"") == 5);
        CHECK(count(r.out, "\"value\":2,\"unit\":null}") == 3);
        CHECK(r.err == (dir / "agent").string() + ": 5 events read, 0 missed\n");
    }
}

TEST_CASE(
    "with --follow the readers notice a writer that died without closing the file, and exit 0") {
    xtel_test::temp_dir dir;
    const pid_t writer_pid = ::fork();
    REQUIRE(writer_pid >= 0);
    if (writer_pid == 0) {
        auto* w = new xtel::flight_recorder::writer(dir.path(), "agent", 16);
        append_named(*w, 3, 7);
        ::_exit(0);  // no destructor: the file stays marked open, and the lock goes
    }
    int status = 0;
    ::waitpid(writer_pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    for (const auto& prog : programs) {
        const auto r = wait_for(
            spawn(prog.args(dir / "agent", {"--follow", "--interval-ms", "10"}), dir, prog.name),
            std::chrono::seconds(10));
        CAPTURE(prog.name, r.err);
        CHECK_FALSE(r.timed_out);
        CHECK(r.exit_code == 0);
        CHECK(count(r.out, "Event: followed\n") == 3);
        CHECK_THAT(r.err, Catch::Contains(fmt::format(
                              "writer pid {} ended without closing the file\n", writer_pid)));
        CHECK_THAT(r.err, Catch::EndsWith(": 3 events read, 0 missed\n"));
    }
}

TEST_CASE("a recorder truncated under a following reader ends it with one line and status 2") {
    xtel_test::temp_dir dir;
    xtel::flight_recorder::writer w(dir.path(), "agent", 64);
    writer_lock lock(w.path());
    append_named(w, 2, 1);
    std::vector<child> followers;
    for (const auto& prog : programs) {
        followers.push_back(
            spawn(prog.args(w.path(), {"--follow", "--interval-ms", "10"}), dir, prog.name));
    }
    for (const auto& f : followers) {
        REQUIRE(wait_for_lines(f.out, 12));
    }
    // 64 bytes keep the header's first page, which the mapping writer still stores into.
    std::filesystem::resize_file(w.path(), 64);
    for (const auto& f : followers) {
        const auto r = wait_for(f, std::chrono::seconds(10));
        CAPTURE(r.err);
        CHECK_FALSE(r.timed_out);
        CHECK(r.exit_code == 2);  // not 128 + SIGBUS
        CHECK(count(r.err, "\n") == 1);
        CHECK_THAT(r.err, Catch::Contains("damaged: truncated"));
        CHECK(count(r.out, "Event: followed\n") == 2);
    }
}

TEST_CASE(
    "with --follow the readers stop on a replaced file, and with --retry follow the new one") {
    xtel_test::temp_dir dir;
    xtel_test::temp_dir elsewhere;
    xtel::flight_recorder::writer w1(dir.path(), "agent", 16);
    writer_lock lock1(w1.path());
    append_named(w1, 2, 1);
    std::vector<std::pair<child, bool>> followers;  // and whether it retries
    for (const auto& prog : programs) {
        for (const bool retry : {false, true}) {
            std::vector<std::string> opts{"--follow", "--json", "--interval-ms", "10"};
            if (retry) {
                opts.push_back("--retry");
            }
            followers.emplace_back(
                spawn(prog.args(w1.path(), opts), dir, fmt::format("{}-{}", prog.name, retry)),
                retry);
        }
    }
    for (const auto& [f, retry] : followers) {
        REQUIRE(wait_for_lines(f.out, 2));
    }
    append_named(w1, 1, 2);  // the rest, which each follower prints before it moves on
    // The path goes away for a while, then a new recorder is moved into place.
    std::filesystem::rename(dir / "agent", dir / "agent.old");
    for (const auto& [f, retry] : followers) {
        if (retry) {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (xtel_test::read_file(f.err).find("waiting for the new one") ==
                       std::string::npos &&
                   std::chrono::steady_clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // still absent meanwhile
    auto w2 = std::make_unique<xtel::flight_recorder::writer>(elsewhere.path(), "agent", 16);
    writer_lock lock2(w2->path());
    append_named(*w2, 4, 3);
    std::filesystem::rename(elsewhere / "agent", dir / "agent");
    for (const auto& [f, retry] : followers) {
        if (retry) {
            REQUIRE(wait_for_lines(f.out, 7));
        }
    }
    w2.reset();  // closed: the retrying followers stop too
    for (const auto& [f, retry] : followers) {
        const auto r = wait_for(f, std::chrono::seconds(10));
        CAPTURE(retry, r.err);
        CHECK_FALSE(r.timed_out);
        CHECK(r.exit_code == 0);
        CHECK(count(r.out, "\"value\":1,\"unit\":null}") == 2);
        CHECK(count(r.out, "\"value\":2,\"unit\":null}") == 1);  // the rest of the old file
        if (retry) {
            CHECK(count(r.out, "\"value\":3,\"unit\":null}") == 4);
            CHECK_THAT(r.err, Catch::Contains("the file was replaced or removed; waiting for the "
                                              "new one\n"));
            CHECK_THAT(r.err, Catch::Contains("following the new file\n"));
            CHECK_THAT(r.err, Catch::EndsWith(": 7 events read, 0 missed\n"));
        } else {
            CHECK(count(r.out, "\"value\":3,\"unit\":null}") == 0);
            CHECK_THAT(r.err, Catch::Contains("stopping (--retry follows the new one)\n"));
        }
    }
}

TEST_CASE("both readers print --help on stdout with every option and exit status") {
    for (const auto& prog : programs) {
        const auto r = xtel_test::run(prog.args("unused", {"--help"}));
        CAPTURE(prog.name);
        CHECK(r.exit_code == 0);
        CHECK(r.err.empty());
        CHECK(r.out.rfind("usage: ", 0) == 0);
        for (const char* word : {"--follow",      "--retry",     "--json",
                                 "--interval-ms", "--help",      "--telemetry_path",
                                 "--category",    "--name",      "--summary",
                                 "--header",      "rate_per_s",  "MEMORY",
                                 "TRANSFER",      "CONNECTION",  "BACKEND",
                                 "ERROR",         "PERFORMANCE", "SYSTEM",
                                 "CUSTOM",        "\\xNN",       "130",
                                 "143",           "  2 ",        "  64 "}) {
            CHECK_THAT(r.out, Catch::Contains(word));
        }
    }
}

TEST_CASE("a name is the bytes before the first NUL of 37, other bytes printed as \\xNN") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    raw_recorder rec(2);
    rec.header.write_seq = rec.header.claim_seq = 2;
    rec.slots[0].seq = 1;
    rec.slots[1].seq = 2;
    // 38 bytes and no NUL: the 38th is not part of the name.
    std::memset(&rec.slots[0].ev.name, 'A', xtel::max_name_length + 1);
    const char odd[] = "a\x01\x7f\xff\\\"b";
    std::memcpy(&rec.slots[1].ev.name, odd, sizeof odd);
    rec.save(dir / "rec", 2);
    const std::string a37(xtel::max_name_length, 'A');
    for (const auto& prog : programs) {
        const auto t = xtel_test::run(prog.args(dir / "rec", {}));
        const auto j = xtel_test::run(prog.args(dir / "rec", {"--json"}));
        CAPTURE(prog.name, t.err, j.err);
        CHECK(t.exit_code == 0);
        CHECK_THAT(t.out, Catch::Contains("Event: " + a37 + "\n"));
        CHECK_THAT(t.out, Catch::Contains("Event: a\\x01\\x7f\\xff\\\\\"b\n"));
        CHECK_THAT(j.out, Catch::Contains("\"event\":\"" + a37 + "\""));
        CHECK_THAT(j.out, Catch::Contains("\"event\":\"a\\\\x01\\\\x7f\\\\xff\\\\\\\\\\\"b\""));
    }
}

TEST_CASE("both readers print the same bytes for 64 random files in every mode") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    std::mt19937_64 rng(20261123);
    const auto pick = [&](std::uint64_t n) { return rng() % n; };
    const auto path = dir / "random";
    for (int file = 0; file < 64; ++file) {
        // Fewer, larger files than one slot each: starting Python dominates the time.
        raw_recorder rec(1 + pick(48));
        const auto cap = rec.header.capacity;
        rec.header.write_seq = pick(4) == 0 ? 0 : pick(200);
        rec.header.claim_seq = rec.header.write_seq + (pick(2) == 0 ? 0 : pick(2 * cap));
        rec.header.state = static_cast<std::uint32_t>(pick(3));
        rec.header.writer_pid = static_cast<std::uint32_t>(rng());
        for (auto& c : rec.header.agent_name) {
            c = static_cast<char>(rng());
        }
        for (std::uint64_t i = 0; i < cap; ++i) {
            auto& s = rec.slots[i];
            // Mostly the sequence a published event would have, else anything.
            const std::uint64_t w = rec.header.write_seq;
            const std::uint64_t n = w >= cap ? w - cap + (i + cap - w % cap) % cap : i;
            s.seq = pick(4) == 0 ? rng() : n + 1;
            s.ev.timestamp_us = pick(3) == 0 ? rng() : 1'700'000'000'000'000 + rng() % (1ULL << 40);
            s.ev.value = rng();
            s.ev.cat = static_cast<xtel::category>(pick(12));
            s.ev.kind = static_cast<xtel::value_kind>(rng());
            auto* name = reinterpret_cast<unsigned char*>(&s.ev.name);
            static constexpr unsigned char alphabet[] = {
                0, 'a', 'Z', ' ', '"', '\\', 0x01, 0x1f, 0x7f, 0x80, 0xc3, 0xa9, 0xff, '%', '{'};
            const bool no_nul = pick(3) == 0;
            for (std::size_t b = 0; b <= xtel::max_name_length; ++b) {
                name[b] = pick(4) == 0 ? static_cast<unsigned char>(rng())
                                       : alphabet[pick(sizeof alphabet)];
                if (no_nul && name[b] == 0) {
                    name[b] = 'n';
                }
            }
        }
        // A few files too short for the ring they declare: refused alike.
        rec.save(path, pick(10) == 0 ? pick(cap) : cap);
        // The runs of a file at once: launching Python dominates the test's time.
        const std::vector<std::string> modes[] = {
            {}, {"--json"}, {"--summary"}, {"--header", "--summary", "--json"}};
        std::vector<child> runs;
        for (const auto& m : modes) {
            runs.push_back(spawn(cpp_args(path, m), dir, "c"));
            runs.push_back(spawn(py_args(path, m), dir, "p"));
        }
        for (std::size_t mode = 0; mode < std::size(modes); ++mode) {
            const auto c = wait_for(runs[2 * mode]);
            const auto p = wait_for(runs[2 * mode + 1]);
            CAPTURE(file, mode, c.err, p.err);
            REQUIRE_FALSE(c.timed_out);
            REQUIRE(c.exit_code == p.exit_code);
            REQUIRE(c.out == p.out);
            REQUIRE(c.err == p.err);
            CHECK((c.exit_code == 0 || c.exit_code == 2));
        }
    }
}

namespace {

/// Runs both readers with the same options; they must agree on stdout, stderr and status.
xtel_test::run_result read_both(const std::filesystem::path& p,
                                const std::vector<std::string>& options) {
    const auto c = xtel_test::run(cpp_args(p, options));
    const auto py = xtel_test::run(py_args(p, options));
    CAPTURE(options, c.err, py.err);
    CHECK(c.exit_code == py.exit_code);
    CHECK(c.out == py.out);
    CHECK(c.err == py.err);
    return c;
}

constexpr std::uint64_t two_63 = std::uint64_t{1} << 63;

/// Events whose summary is known: "big" sums past 2^64, "small" is in two categories.
void write_summary_events(const xtel_test::temp_dir& dir) {
    xtel::buffer_telemetry t(buffer_config(dir, 64), "agent");
    t.record_at(1'000'000, xtel::category::transfer, "big", two_63 + 1);
    t.record_at(1'500'000, xtel::category::transfer, "big", two_63 + 3);
    t.record_at(2'000'000, xtel::category::transfer, "big", two_63);
    t.record_at(10'000'000, xtel::category::custom, "small", 7);
    t.record_at(10'250'000, xtel::category::custom, "small", 2);
    t.record_at(10'500'000, xtel::category::custom, "small", 9);
    t.record_at(14'000'000, xtel::category::custom, "small", 1);
    t.record_at(20'000'000, xtel::category::error, "one", 42);
    t.record_at(30'000'000, xtel::category::memory, "small", 5);
}

/// Lines of `out` holding `what`.
std::size_t lines_with(const std::string& out, const std::string& what) {
    std::size_t n = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        n += line.find(what) != std::string::npos ? 1 : 0;
    }
    return n;
}

}  // namespace

namespace {

/// An event and the unit docs/events.md gives it, "" for none: every event name xtel records,
/// in its category, then names the readers cannot know.
struct unit_case {
    xtel::category cat;
    std::string name;
    std::string unit;
};

std::vector<unit_case> unit_cases() {
    using c = xtel::category;
    std::vector<unit_case> cases = {
        {c::memory, "agent_memory_registered", "bytes"},
        {c::memory, "agent_memory_deregistered", "bytes"},
        {c::transfer, "agent_tx_bytes", "bytes"},
        {c::transfer, "agent_rx_bytes", "bytes"},
        {c::transfer, "agent_tx_requests_num", "count"},
        {c::transfer, "agent_rx_requests_num", "count"},
        {c::performance, "agent_xfer_time", "us"},
        {c::performance, "agent_xfer_post_time", "us"},
        {c::connection, "agent_connect", "count"},
        {c::connection, "agent_disconnect", "count"},
        {c::connection, "agent_connections", "count"},
        {c::backend, "ucx_backend_init", "count"},
        {c::backend, "ucx_version", "version"},
        {c::backend, "ucx_endpoint_error", "count"},
        {c::backend, "ucx_tl_sysv", "count"},
        {c::backend, "ucx_tl_tcp", "count"},
        {c::system, "agent_start", "pid"},
        {c::system, "agent_stop", "pid"},
        {c::system, "telemetry_events_dropped", "count"},
        // A user's own events, and xtel's names in a category xtel never records them in.
        {c::custom, "my_latency", ""},
        {c::custom, "agent_xfer_time", ""},
        {c::memory, "agent_tx_bytes", ""},
        {c::backend, "ucx_tl_", ""},
        {c::error, "agent_error_", ""},
    };
    for (const char* status :
         {"invalid_argument", "not_found", "busy", "not_supported", "bad_metadata",
          "remote_disconnected", "timed_out", "backend_error"}) {
        cases.push_back({c::error, fmt::format("agent_error_{}", status), "count"});
    }
    return cases;
}

}  // namespace

TEST_CASE("both readers print each event's unit in text, JSON and the summary, the same bytes") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    const auto cases = unit_cases();
    {
        xtel::buffer_telemetry t(buffer_config(dir, 256), "agent");
        for (std::size_t i = 0; i < cases.size(); ++i) {
            t.record_at(1'000'000 + i, cases[i].cat, xtel::event_name(cases[i].name), 100 + i);
        }
    }
    const auto path = dir / "agent";
    const auto text = read_both(path, {});
    const auto json = read_both(path, {"--json"});
    const auto summary = read_both(path, {"--summary"});
    const auto summary_json = read_both(path, {"--summary", "--json"});
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto& u = cases[i];
        CAPTURE(u.name, xtel::to_string(u.cat), u.unit);
        const auto shown = u.unit.empty() ? std::string("-") : u.unit;
        const auto quoted = u.unit.empty() ? std::string("null") : "\"" + u.unit + "\"";
        CHECK(count(text.out, fmt::format("Category: {}\nEvent: {}\nValue: {}\nUnit: {}\n=",
                                          xtel::to_string(u.cat), u.name, 100 + i, shown)) == 1);
        CHECK(count(json.out,
                    fmt::format("\"category\":\"{}\",\"event\":\"{}\",\"value\":{},\"unit\":{}}}\n",
                                xtel::to_string(u.cat), u.name, 100 + i, quoted)) == 1);
        CHECK(count(summary_json.out,
                    fmt::format("{{\"category\":\"{}\",\"event\":\"{}\",\"unit\":{},\"count\":1,",
                                xtel::to_string(u.cat), u.name, quoted)) == 1);
        // A row: category, name and unit, each padded to its column, then the numbers.
        std::size_t rows = 0;
        std::istringstream in(summary.out);
        for (std::string line; std::getline(in, line);) {
            std::istringstream cells(line);
            std::string cat, name, unit;
            cells >> cat >> name >> unit;
            rows += cat == xtel::to_string(u.cat) && name == u.name && unit == shown ? 1 : 0;
        }
        CHECK(rows == 1);
    }
    CHECK_THAT(summary.out,
               Catch::StartsWith("category     event                            unit     "
                                 "count"));
    CHECK(count(json.out, "\n") == cases.size());
    CHECK(count(summary_json.out, "\n") == cases.size());
    // Valid JSON, parsed by another program than the two that wrote it.
    const auto lines = dir / "lines.json";
    std::ofstream(lines) << json.out << summary_json.out;
    const auto parsed = xtel_test::run({python, "-c",
                                        "import json, sys\n"
                                        "for line in open(sys.argv[1], encoding='ascii'):\n"
                                        "    o = json.loads(line)\n"
                                        "    print(o['event'], o['unit'])\n",
                                        lines.string()});
    CAPTURE(parsed.err);
    REQUIRE(parsed.exit_code == 0);
    for (const auto& u : cases) {
        CHECK(count("\n" + parsed.out,
                    fmt::format("\n{} {}\n", u.name, u.unit.empty() ? "None" : u.unit)) == 2);
    }
}

TEST_CASE("both readers take the path alone or after --telemetry_path") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    write_known_events(dir);
    const auto p = (dir / "agent").string();
    const std::vector<std::string> forms[] = {{cpp_reader, p},
                                              {cpp_reader, "--telemetry_path", p},
                                              {python, py_reader, p},
                                              {python, py_reader, "--telemetry_path", p}};
    const auto first = xtel_test::run(forms[0]);
    REQUIRE(first.exit_code == 0);
    CHECK(count(first.out, "=== NIXL Telemetry Event ===") == 6);
    for (const auto& form : forms) {
        const auto r = xtel_test::run(form);
        CAPTURE(form, r.err);
        CHECK(r.exit_code == 0);
        CHECK(r.out == first.out);
        CHECK(r.err == first.err);
    }
    for (const auto& prog : programs) {
        const auto r = xtel_test::run(prog.args(p, {"--telemetry_path", p}));
        CAPTURE(prog.name);
        CHECK(r.exit_code == 64);
        CHECK_THAT(r.err, Catch::Contains("one path only"));
    }
}

TEST_CASE("the summary gives count exact sum min max last and rate per category and name") {
    xtel_test::temp_dir dir;
    write_summary_events(dir);
    const auto text = read_both(dir / "agent", {"--summary"});
    REQUIRE(text.exit_code == 0);
    // 3 * 2^63 + 4 does not fit 64 bits; rates are (count - 1) / seconds of span.
    // None of these names is xtel's: their unit is unknown.
    CHECK(text.out ==
          "category  event  unit  count                   sum                  min"
          "                  max                 last  rate_per_s\n"
          "MEMORY    small  -         1                     5                    5"
          "                    5                    5           -\n"
          "TRANSFER  big    -         3  27670116110564327428  9223372036854775808"
          "  9223372036854775811  9223372036854775808       2.000\n"
          "ERROR     one    -         1                    42                   42"
          "                   42                   42           -\n"
          "CUSTOM    small  -         4                    19                    1"
          "                    9                    1       0.750\n");
    CHECK(text.err == (dir / "agent").string() + ": 9 events read, 0 missed\n");
    const auto json = read_both(dir / "agent", {"--summary", "--json"});
    REQUIRE(json.exit_code == 0);
    CHECK(count(json.out, "\n") == 4);
    CHECK_THAT(json.out,
               Catch::Contains("{\"category\":\"TRANSFER\",\"event\":\"big\",\"unit\":null,"
                               "\"count\":3,"
                               "\"sum\":27670116110564327428,\"min\":9223372036854775808,"
                               "\"max\":9223372036854775811,\"last\":9223372036854775808,"
                               "\"rate_per_s\":2.000,\"min_timestamp_us\":1000000,"
                               "\"max_timestamp_us\":2000000}\n"));
    CHECK_THAT(json.out,
               Catch::Contains("\"event\":\"one\",\"unit\":null,\"count\":1,\"sum\":42,\"min\":42,"
                               "\"max\":42,\"last\":42,\"rate_per_s\":null,"));
}

TEST_CASE("a category filter keeps exactly the events of the categories named in any case") {
    xtel_test::temp_dir dir;
    write_summary_events(dir);
    const auto transfer = read_both(dir / "agent", {"--json", "--category", "transfer"});
    REQUIRE(transfer.exit_code == 0);
    CHECK(count(transfer.out, "\n") == 3);
    CHECK(lines_with(transfer.out, "\"category\":\"TRANSFER\",\"event\":\"big\"") == 3);
    const auto two =
        read_both(dir / "agent", {"--json", "--category", "Custom", "--category", "MEMORY"});
    REQUIRE(two.exit_code == 0);
    CHECK(count(two.out, "\n") == 5);
    CHECK(lines_with(two.out, "\"event\":\"small\"") == 5);
    CHECK(lines_with(two.out, "\"category\":\"MEMORY\"") == 1);
    // The count on stderr is of the events read, kept or not.
    CHECK_THAT(two.err, Catch::EndsWith(": 9 events read, 0 missed\n"));
    const auto summed = read_both(dir / "agent", {"--summary", "--category", "custom"});
    CHECK(count(summed.out, "\n") == 2);
    CHECK_THAT(
        summed.out,
        Catch::EndsWith("\nCUSTOM    small  -         4   19    1    9     1       0.750\n"));
}

TEST_CASE("a name filter keeps exactly the events whose whole name matches the glob") {
    xtel_test::temp_dir dir;
    write_summary_events(dir);
    struct expected {
        const char* glob;
        std::size_t big, small, one;
    };
    const expected cases[] = {
        {"big", 3, 0, 0},     {"bi", 0, 0, 0},        {"sm*", 0, 5, 0},    {"?ig", 3, 0, 0},
        {"*", 3, 5, 1},       {"[!s]*", 3, 0, 1},     {"[a-c]*", 3, 0, 0}, {"*l", 0, 5, 0},
        {"o[m-o]e", 0, 0, 1}, {"[sb]*[gl]", 3, 5, 0}, {"s*a*l", 0, 5, 0},  {"[", 0, 0, 0},
    };
    for (const auto& c : cases) {
        CAPTURE(c.glob);
        const auto r = read_both(dir / "agent", {"--json", "--name", c.glob});
        REQUIRE(r.exit_code == 0);
        CHECK(count(r.out, "\n") == c.big + c.small + c.one);
        CHECK(lines_with(r.out, "\"event\":\"big\"") == c.big);
        CHECK(lines_with(r.out, "\"event\":\"small\"") == c.small);
        CHECK(lines_with(r.out, "\"event\":\"one\"") == c.one);
    }
    const auto both = read_both(dir / "agent", {"--json", "--name", "s*", "--category", "memory"});
    CHECK(count(both.out, "\n") == 1);
    CHECK_THAT(
        both.out,
        Catch::Contains("\"category\":\"MEMORY\",\"event\":\"small\",\"value\":5,\"unit\":null}"));
}

TEST_CASE("the header mode gives format version capacity writer pid state written and missed") {
    xtel_test::temp_dir dir;
    {
        xtel::buffer_telemetry t(buffer_config(dir, 4), "wrapped");
        for (std::uint64_t i = 0; i < 10; ++i) {
            t.record_at(1'000'000 + i, xtel::category::custom, "n", i);
        }
    }
    const auto text = read_both(dir / "wrapped", {"--header"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.rfind(fmt::format("format version: 2\nagent: wrapped\ncapacity: 4 events\n"
                                     "writer pid: {}\nstate: closed\ncreated: ",
                                     ::getpid()),
                         0) == 0);
    CHECK_THAT(text.out, Catch::EndsWith("\nwritten: 10\nread: 4\nmissed: 6\n"));
    CHECK(count(text.out, "\n") == 9);
    const auto json = read_both(dir / "wrapped", {"--header", "--json"});
    CHECK_THAT(json.out, Catch::StartsWith(fmt::format(
                             "{{\"format_version\":2,\"agent\":\"wrapped\",\"capacity\":4,"
                             "\"writer_pid\":{},\"state\":\"closed\",\"created_us\":",
                             ::getpid())));
    CHECK_THAT(json.out, Catch::EndsWith(",\"written\":10,\"read\":4,\"missed\":6}\n"));
}

TEST_CASE("the header mode tells a live writer from a crashed one by its lock") {
    xtel_test::temp_dir dir;
    const pid_t dead = ::fork();
    REQUIRE(dead >= 0);
    if (dead == 0) {
        auto* w = new xtel::flight_recorder::writer(dir.path(), "crashed", 16);
        append_named(*w, 3, 7);
        ::_exit(0);  // no destructor: state stays open, and the lock goes with the process
    }
    int status = 0;
    ::waitpid(dead, &status, 0);
    REQUIRE(WIFEXITED(status));
    xtel::flight_recorder::writer live(dir.path(), "live", 16);
    append_named(live, 2, 1);
    const auto crashed = read_both(dir / "crashed", {"--header"});
    CHECK_THAT(crashed.out, Catch::Contains(fmt::format("writer pid: {}\nstate: crashed\n", dead)));
    CHECK_THAT(crashed.out, Catch::EndsWith("written: 3\nread: 3\nmissed: 0\n"));
    const auto alive = read_both(dir / "live", {"--header"});
    CHECK_THAT(alive.out,
               Catch::Contains(fmt::format("writer pid: {}\nstate: alive\n", ::getpid())));
    CHECK_THAT(alive.out, Catch::EndsWith("written: 2\nread: 2\nmissed: 0\n"));
}

TEST_CASE("both readers print the same bytes in every mode for files real writers made") {
    utc_scope utc;
    xtel_test::temp_dir dir;
    write_known_events(dir);
    {
        xtel::buffer_telemetry t(buffer_config(dir, 8), "wrapped");
        for (std::uint64_t i = 0; i < 50; ++i) {
            t.record_at(5'000'000 + i * 1'000, static_cast<xtel::category>(i % 8),
                        i % 3 == 0 ? "agent_tx_bytes" : "agent_rx_bytes", i * i);
        }
    }
    xtel_test::temp_dir other;
    write_summary_events(other);
    const std::vector<std::string> modes[] = {
        {},
        {"--json"},
        {"--summary"},
        {"--summary", "--json"},
        {"--header"},
        {"--header", "--json"},
        {"--header", "--summary"},
        {"--category", "transfer"},
        {"--category", "Error", "--json"},
        {"--name", "agent_?x_*"},
        {"--name", "*[!s]", "--summary", "--category", "transfer", "--category", "performance"},
    };
    for (const auto& p : {dir / "agent", dir / "wrapped", other / "agent"}) {
        for (const auto& m : modes) {
            CAPTURE(p);
            const auto r = read_both(p, m);
            CHECK(r.exit_code == 0);
        }
    }
}

TEST_CASE("both readers answer a bad command line with one line on stderr and status 64") {
    xtel_test::temp_dir dir;
    write_known_events(dir);
    const std::vector<std::string> bad[] = {
        {"--category", "bogus"},
        {"--name"},
        {"--category"},
        {"--summary", "--follow"},
        {"--header", "-f"},
        {"--bogus"},
        {"--interval-ms", "0"},
        {"--interval-ms", "10x"},
        {"--retry"},
    };
    for (const auto& prog : programs) {
        for (const auto& args : bad) {
            const auto r = xtel_test::run(prog.args(dir / "agent", args));
            CAPTURE(prog.name, args, r.err);
            CHECK(r.exit_code == 64);
            CHECK(r.out.empty());
            CHECK(count(r.err, "\n") == 1);
        }
        const auto r = xtel_test::run(prog.args(dir / "agent", {"--category", "bogus"}));
        CHECK_THAT(r.err, Catch::Contains("unknown category \"bogus\""));
        for (const char* c : {"MEMORY", "TRANSFER", "CONNECTION", "BACKEND", "ERROR", "PERFORMANCE",
                              "SYSTEM", "CUSTOM"}) {
            CHECK_THAT(r.err, Catch::Contains(c));
        }
    }
}

}  // namespace readers_test
