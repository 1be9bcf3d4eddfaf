// The flight recorder writer against what can happen to its file while it runs: cut short,
// deleted, replaced, claimed by a second writer, or left behind by a writer that crashed.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"
#include "xtel/exporters/buffer.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace recorder_writer_test {

namespace fr = xtel::flight_recorder;

namespace {

xtel::event numbered(std::uint64_t i) {
    xtel::event e;
    e.timestamp_us = i;
    e.value = i;
    e.cat = xtel::category::custom;
    e.kind = xtel::value_kind::counter;
    e.name = xtel::event_name("numbered");
    return e;
}

std::vector<xtel::event> numbered_range(std::uint64_t from, std::uint64_t to) {
    std::vector<xtel::event> v;
    for (auto i = from; i < to; ++i) {
        v.push_back(numbered(i));
    }
    return v;
}

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

xtel::config buffer_config(const xtel_test::temp_dir& dir) {
    xtel::config cfg;
    cfg.enabled = true;
    cfg.buffer_size = 32;
    cfg.output_path = dir.path().string();
    return cfg;
}

/// What a test does to a running writer's file, and the words its one log line must use.
struct damage {
    const char* name;
    const char* logged;
};

void apply(const damage& d, const std::filesystem::path& path) {
    const std::string what = d.name;
    if (what == "truncated to 0") {
        REQUIRE(::truncate(path.c_str(), 0) == 0);
    } else if (what == "shrunk to half") {
        const auto size = std::filesystem::file_size(path);
        REQUIRE(::truncate(path.c_str(), static_cast<off_t>(size / 2)) == 0);
    } else if (what == "deleted") {
        REQUIRE(::unlink(path.c_str()) == 0);
    } else {
        const auto other = path.parent_path() / "other";
        std::ofstream(other) << "someone else's file";
        REQUIRE(std::rename(other.c_str(), path.c_str()) == 0);
    }
}

/// Forks a process that creates a writer for `name`, appends `events` events and exits without
/// running the writer's destructor, as a crash would. Returns its pid once it has exited.
pid_t crash_a_writer(const xtel_test::temp_dir& dir, const char* name, std::uint64_t events) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto* w = new fr::writer(dir.path(), name, 16);  // never deleted: the crash
        w->append(numbered_range(0, events));
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return child;
}

std::vector<std::string> file_names(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE(
    "a recorder cut short, deleted or replaced under a running buffer exporter turns it off "
    "with one error, no signal, and its events counted as lost") {
    const auto d = GENERATE(damage{"truncated to 0", "was truncated to 0 bytes"},
                            damage{"shrunk to half", "was truncated to"},
                            damage{"deleted", "was deleted or replaced"},
                            damage{"replaced", "was deleted or replaced"});
    CAPTURE(d.name);
    xtel_test::temp_dir dir;
    const auto path = dir / "agent";
    const xtel_test::log_capture logs;
    const auto cfg = buffer_config(dir);
    {
        xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent"});
        b.export_batch(numbered_range(0, 5));
        b.on_flush_end();
        REQUIRE_FALSE(b.disabled());

        apply(d, path);
        const auto left = std::filesystem::exists(path) ? slurp(path) : std::string("(none)");
        b.export_batch(numbered_range(5, 12));
        b.on_flush_end();
        b.export_batch(numbered_range(12, 15));
        b.on_flush_end();

        CHECK(b.disabled());
        CHECK(b.events_lost() == 10);
        CHECK_THAT(b.error(), Catch::Contains(path.string()) && Catch::Contains(d.logged));
        const auto errors = logs.at(xtel::log_level::error);
        REQUIRE(errors.size() == 1);
        CHECK_THAT(errors[0], Catch::Contains(path.string()) && Catch::Contains(d.logged) &&
                                  Catch::Contains("recording stopped"));
        // Whatever is at the path now is not written to, not even when the writer closes.
        CHECK((std::filesystem::exists(path) ? slurp(path) : std::string("(none)")) == left);
    }
    CHECK(logs.at(xtel::log_level::error).size() == 1);
}

TEST_CASE("a recorder truncated while its writer appends from another thread stops it once",
          "[concurrency]") {
    xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    fr::writer w(dir.path(), "agent", 1024);
    std::atomic<std::uint64_t> batches{0};
    std::thread flusher([&] {
        const auto batch = numbered_range(0, 100);
        while (w.append(batch)) {
            batches.fetch_add(1, std::memory_order_relaxed);
        }
    });
    while (batches.load(std::memory_order_relaxed) < 50) {
        std::this_thread::yield();
    }
    REQUIRE(::truncate((dir / "agent").c_str(), 0) == 0);
    flusher.join();
    CHECK(w.failed());
    CHECK_FALSE(w.append(numbered_range(0, 3)));
    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0],
               Catch::Contains((dir / "agent").string()) && Catch::Contains("was truncated"));
}

TEST_CASE("a recorder truncated and grown back to its size under its writer stops it once") {
    // What a truncation between the writer's size check and its writes leaves: the writes grow
    // the file back, the gap reads as zeros, and the size alone looks right.
    xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    fr::writer w(dir.path(), "agent", 64);
    REQUIRE(w.append(numbered_range(0, 10)));
    const auto size = std::filesystem::file_size(dir / "agent");
    REQUIRE(::truncate((dir / "agent").c_str(), 0) == 0);
    REQUIRE(::truncate((dir / "agent").c_str(), static_cast<off_t>(size)) == 0);
    CHECK_FALSE(w.append(numbered_range(10, 20)));
    CHECK(w.failed());
    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains("its header is gone"));
}

TEST_CASE("a second writer for a live name throws naming the live writer and leaves its file") {
    xtel_test::temp_dir dir;
    const auto path = dir / "agent";
    fr::writer first(dir.path(), "agent", 16);
    first.append(numbered_range(0, 3));
    const auto before = slurp(path);
    CHECK_THROWS_WITH(fr::writer(dir.path(), "agent", 32),
                      Catch::Contains(path.string()) && Catch::Contains("live writer") &&
                          Catch::Contains("process " + std::to_string(::getpid())));
    CHECK(slurp(path) == before);
    CHECK(file_names(dir.path()) == std::vector<std::string>{"agent"});  // no temporary left

    first.append(numbered_range(3, 5));
    fr::reader r(path);
    CHECK(r.capacity() == 16);
    std::uint64_t expected = 0;
    r.poll([&](const xtel::event& e) { CHECK(e.value == expected++); });
    CHECK(expected == 5);
}

TEST_CASE(
    "a second buffer exporter with the same agent name in one process is disabled with one "
    "error and the first keeps recording") {
    xtel_test::temp_dir dir;
    const auto cfg = buffer_config(dir);
    const auto path = dir / "agent";
    xtel::buffer_exporter first(xtel::exporter_context{cfg, "agent"});
    first.export_batch(numbered_range(0, 2));
    first.on_flush_end();
    const xtel_test::log_capture logs;
    xtel::buffer_exporter second(xtel::exporter_context{cfg, "agent"});
    CHECK(second.disabled());
    second.export_batch(numbered_range(0, 4));
    second.on_flush_end();
    CHECK(second.events_lost() == 4);
    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains(path.string()) &&
                              Catch::Contains("process " + std::to_string(::getpid())));

    first.export_batch(numbered_range(2, 6));
    first.on_flush_end();
    CHECK_FALSE(first.disabled());
    fr::reader r(path);
    CHECK(r.published_count() == 6);
}

TEST_CASE("a recorder left by a crashed writer is kept as <name>.crashed.<pid> and readable") {
    xtel_test::temp_dir dir;
    const pid_t dead = crash_a_writer(dir, "agent", 7);
    const auto kept = dir / ("agent.crashed." + std::to_string(dead));
    const xtel_test::log_capture logs;
    fr::writer w(dir.path(), "agent", 8);

    REQUIRE(std::filesystem::exists(kept));
    fr::reader old(kept);
    CHECK(old.writer_pid() == static_cast<std::uint32_t>(dead));
    CHECK_FALSE(old.writer_closed());
    std::uint64_t expected = 0;
    old.poll([&](const xtel::event& e) { CHECK(e.value == expected++); });
    CHECK(expected == 7);
    CHECK(old.missed() == 0);

    const auto warnings = logs.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("process " + std::to_string(dead)) &&
                                Catch::Contains(kept.string()));
    fr::reader now(dir / "agent");
    CHECK(now.writer_pid() == static_cast<std::uint32_t>(::getpid()));
    CHECK(now.published_count() == 0);
}

TEST_CASE("only the three newest crashed copies of a name are kept") {
    xtel_test::temp_dir dir;
    std::vector<pid_t> dead;
    for (int i = 0; i < 5; ++i) {
        dead.push_back(crash_a_writer(dir, "agent", 1));
        { fr::writer w(dir.path(), "agent", 8); }  // moves the crashed file aside, closes cleanly
    }
    std::vector<std::string> expected{"agent"};
    for (std::size_t i = 2; i < 5; ++i) {
        expected.push_back("agent.crashed." + std::to_string(dead[i]));
    }
    std::sort(expected.begin(), expected.end());
    CHECK(file_names(dir.path()) == expected);
}

TEST_CASE("a closed recorder or a file that is not one is replaced, not kept") {
    xtel_test::temp_dir dir;
    { fr::writer w(dir.path(), "closed", 8); }
    std::ofstream(dir / "junk") << "not a flight recorder";
    const xtel_test::log_capture logs;
    fr::writer a(dir.path(), "closed", 8);
    fr::writer b(dir.path(), "junk", 8);
    CHECK(file_names(dir.path()) == std::vector<std::string>{"closed", "junk"});
    CHECK(logs.all().empty());
    CHECK(fr::reader(dir / "junk").capacity() == 8);
}

}  // namespace recorder_writer_test
