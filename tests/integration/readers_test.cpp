#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "test_util.hpp"
#include "xtel/flight_recorder.hpp"
#include "xtel/pipelines.hpp"

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
                                      "===========================\n"));
    CHECK_THAT(r.out,
               Catch::Contains("Category: MEMORY\nEvent: agent_memory_registered\nValue: 4096\n"));
    CHECK_THAT(r.out,
               Catch::Contains("Category: PERFORMANCE\nEvent: agent_xfer_time\nValue: 345\n"));
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
            "\"category\":\"TRANSFER\",\"event\":\"agent_tx_bytes\",\"value\":1048576}\n"));
    CHECK_THAT(cj.out, Catch::Contains("\"event\":\"odd \\\"name\\\"\\\\\""));
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
        CHECK_THAT(r.out, Catch::Contains("\"value\":9}"));
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
        CHECK(WEXITSTATUS(status) == 0);
    }
    std::ifstream cf(dir / "c.out"), pf(dir / "p.out");
    std::stringstream cs, ps;
    cs << cf.rdbuf();
    ps << pf.rdbuf();
    CHECK(cs.str() == ps.str());
}
