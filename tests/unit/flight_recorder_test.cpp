#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"
#include "xtel/exporters/buffer.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace flight_recorder_test {

namespace fr = xtel::flight_recorder;

namespace {

xtel::event make(std::uint64_t i) {
    xtel::event e;
    e.timestamp_us = 1'000'000 + i;
    e.value = i * 3;
    e.cat = static_cast<xtel::category>(i % xtel::category_count);
    e.kind = xtel::value_kind::counter;
    e.name = xtel::event_name("event_" + std::to_string(i));
    return e;
}

std::vector<xtel::event> make_range(std::uint64_t from, std::uint64_t to) {
    std::vector<xtel::event> v;
    for (auto i = from; i < to; ++i) {
        v.push_back(make(i));
    }
    return v;
}

std::vector<xtel::event> read_all(fr::reader& r) {
    std::vector<xtel::event> out;
    r.poll([&](const xtel::event& e) { out.push_back(e); });
    return out;
}

void write_bytes(const std::filesystem::path& p, const void* data, std::size_t n) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

std::string open_error(const std::filesystem::path& p) {
    try {
        fr::reader r(p);
    } catch (const fr::format_error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("the flight recorder file is created with mode 0600 and a complete header") {
    xtel_test::temp_dir dir;
    fr::writer w(dir.path(), "agent-a", 16);
    struct stat st {};
    REQUIRE(::stat((dir / "agent-a").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_size == static_cast<off_t>(fr::header_size + 16 * fr::slot_size));
    fr::reader r(dir / "agent-a");
    CHECK(r.capacity() == 16);
    CHECK(r.agent_name() == "agent-a");
    CHECK(r.writer_pid() == static_cast<std::uint32_t>(::getpid()));
    CHECK(r.published_count() == 0);
    CHECK_FALSE(r.writer_closed());
}

TEST_CASE("a reader gets back exactly the events written") {
    xtel_test::temp_dir dir;
    fr::writer w(dir.path(), "agent", 64);
    const auto events = make_range(0, 10);
    w.append(events);
    fr::reader r(dir / "agent");
    const auto got = read_all(r);
    REQUIRE(got.size() == 10);
    for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(std::memcmp(&got[i], &events[i], sizeof(xtel::event)) == 0);
    }
    CHECK(r.missed() == 0);
}

TEST_CASE("a following reader sees only new events on each poll") {
    xtel_test::temp_dir dir;
    fr::writer w(dir.path(), "agent", 64);
    fr::reader r(dir / "agent");
    CHECK(read_all(r).empty());
    w.append(make_range(0, 3));
    CHECK(read_all(r).size() == 3);
    w.append(make_range(3, 8));
    const auto got = read_all(r);
    REQUIRE(got.size() == 5);
    CHECK(got.front().value == 9);
    CHECK(r.position() == 8);
}

TEST_CASE("the ring overwrites the oldest events and the reader counts them as missed") {
    xtel_test::temp_dir dir;
    fr::writer w(dir.path(), "agent", 8);
    w.append(make_range(0, 20));
    fr::reader r(dir / "agent");
    const auto got = read_all(r);
    REQUIRE(got.size() == 8);
    CHECK(got.front().value == make(12).value);
    CHECK(got.back().value == make(19).value);
    CHECK(r.missed() == 12);
    // A reader that falls behind by more than the capacity misses exactly the overwritten part.
    w.append(make_range(20, 45));
    const auto later = read_all(r);
    REQUIRE(later.size() == 8);
    CHECK(later.front().value == make(37).value);
    CHECK(r.missed() == 12 + 17);
}

TEST_CASE("a closed writer is visible to readers and the file stays for post-mortem reading") {
    xtel_test::temp_dir dir;
    {
        fr::writer w(dir.path(), "agent", 8);
        w.append(make_range(0, 2));
    }
    fr::reader r(dir / "agent");
    CHECK(r.writer_closed());
    CHECK(read_all(r).size() == 2);
}

TEST_CASE("a new writer replaces the previous file of the same agent") {
    xtel_test::temp_dir dir;
    {
        fr::writer w(dir.path(), "agent", 8);
        w.append(make_range(0, 5));
    }
    fr::writer w(dir.path(), "agent", 32);
    fr::reader r(dir / "agent");
    CHECK(r.capacity() == 32);
    CHECK(r.published_count() == 0);
}

TEST_CASE("the writer refuses a symbolic link at its path and leaves the target alone") {
    xtel_test::temp_dir dir;
    const auto target = dir / "precious";
    write_bytes(target, "keep", 4);
    std::filesystem::create_symlink(target, dir / "agent");
    CHECK_THROWS_WITH(fr::writer(dir.path(), "agent", 8), Catch::Contains("symbolic link"));
    CHECK(std::filesystem::file_size(target) == 4);
    CHECK(std::filesystem::is_symlink(dir / "agent"));
}

TEST_CASE("the writer refuses agent names that are not a single file name") {
    xtel_test::temp_dir dir;
    for (const char* bad : {"", ".", "..", "../x", "a/b"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(fr::writer(dir.path(), bad, 8), xtel::error);
    }
}

TEST_CASE("the writer reports a directory it cannot create files in") {
    CHECK_THROWS_WITH(fr::writer("/nonexistent-xtel-dir", "agent", 8),
                      Catch::Contains("/nonexistent-xtel-dir") && Catch::Contains("cannot create"));
}

TEST_CASE("files that are not telemetry buffers are refused with the reason") {
    xtel_test::temp_dir dir;
    CHECK_THAT(open_error(dir / "missing"), Catch::Contains("cannot open"));
    CHECK_THAT(open_error(dir.path()), Catch::Contains("is a directory"));

    write_bytes(dir / "short", "XTELTLM", 7);
    CHECK_THAT(open_error(dir / "short"), Catch::Contains("truncated"));

    std::vector<char> junk(4096, 'x');
    write_bytes(dir / "junk", junk.data(), junk.size());
    CHECK_THAT(open_error(dir / "junk"), Catch::Contains("bad magic"));

    { fr::writer w(dir.path(), "good", 8); }
    std::vector<char> bytes(fr::header_size + 8 * fr::slot_size);
    std::ifstream(dir / "good", std::ios::binary)
        .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));

    auto version = bytes;
    const std::uint32_t v99 = 99;
    std::memcpy(version.data() + offsetof(fr::file_header, version), &v99, 4);
    write_bytes(dir / "version", version.data(), version.size());
    CHECK_THAT(open_error(dir / "version"), Catch::Contains("unsupported format version 99"));

    write_bytes(dir / "cut", bytes.data(), bytes.size() - 1);
    CHECK_THAT(open_error(dir / "cut"), Catch::Contains("truncated"));

    auto layout = bytes;
    const std::uint32_t slot128 = 128;
    std::memcpy(layout.data() + offsetof(fr::file_header, slot_size), &slot128, 4);
    write_bytes(dir / "layout", layout.data(), layout.size());
    CHECK_THAT(open_error(dir / "layout"), Catch::Contains("unexpected layout"));

    auto huge = bytes;
    const std::uint64_t cap = std::uint64_t{1} << 60;
    std::memcpy(huge.data() + offsetof(fr::file_header, capacity), &cap, 8);
    write_bytes(dir / "huge", huge.data(), huge.size());
    // 2^60 slots of 64 bytes do not fit in 64 bits of file size.
    CHECK_THAT(open_error(dir / "huge"), Catch::Contains("absurd capacity"));
    const std::uint64_t big = std::uint64_t{1} << 20;
    std::memcpy(huge.data() + offsetof(fr::file_header, capacity), &big, 8);
    write_bytes(dir / "big", huge.data(), huge.size());
    CHECK_THAT(open_error(dir / "big"), Catch::Contains("truncated"));
}

TEST_CASE("a refused flight recorder says which fault it has, as a refused node file does") {
    xtel_test::temp_dir dir;
    const auto fault_of = [](const std::filesystem::path& p) {
        try {
            fr::reader r(p);
        } catch (const xtel::format_error& e) {
            return e.kind();
        }
        FAIL("no format_error for " << p);
        return xtel::file_fault::damaged;
    };
    CHECK(fault_of(dir / "missing") == xtel::file_fault::unreadable);
    CHECK(fault_of(dir.path()) == xtel::file_fault::not_regular);
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    CHECK(fault_of(dir / "fifo") == xtel::file_fault::not_regular);
    std::vector<char> junk(4096, 'x');
    write_bytes(dir / "junk", junk.data(), junk.size());
    CHECK(fault_of(dir / "junk") == xtel::file_fault::wrong_format);

    fr::writer w(dir.path(), "cut", 8);
    fr::reader r(w.path());
    REQUIRE(::truncate(w.path().c_str(), 64) == 0);
    try {
        (void)r.writer_closed();
        FAIL("no format_error for a file cut below its header");
    } catch (const xtel::format_error& e) {
        CHECK(e.kind() == xtel::file_fault::damaged);
        CHECK_THAT(e.what(), Catch::Contains("damaged: truncated below its 128-byte header"));
    }
}

namespace {
/// The values of events read, which make() numbered.
std::vector<std::uint64_t> numbers(const std::vector<xtel::event>& events) {
    std::vector<std::uint64_t> out;
    for (const auto& e : events) {
        out.push_back(e.timestamp_us - 1'000'000);
    }
    return out;
}
std::vector<std::uint64_t> iota(std::uint64_t from, std::uint64_t to) {
    std::vector<std::uint64_t> out;
    for (auto i = from; i < to; ++i) {
        out.push_back(i);
    }
    return out;
}
}  // namespace

TEST_CASE("staged events are published at commit, and a round keeps what the ring keeps") {
    xtel_test::temp_dir dir;
    fr::writer w(dir.path(), "agent", 8);
    fr::reader follower(dir / "agent");

    REQUIRE(w.stage(make_range(0, 5)));
    CHECK(w.staged() == 5);
    CHECK(follower.published_count() == 0);  // nothing visible before the commit
    REQUIRE(w.commit());
    CHECK(w.staged() == 0);
    CHECK(numbers(read_all(follower)) == iota(0, 5));

    // Two batches of one round, 10 events into 8 slots, the changed slots wrapping the ring's
    // end: one reader arriving now reads the last 8, the follower misses the 2 overwritten.
    REQUIRE(w.stage(make_range(5, 11)));
    REQUIRE(w.stage(make_range(11, 15)));
    REQUIRE(w.commit());
    CHECK(w.written() == 15);
    fr::reader late(dir / "agent");
    CHECK(late.published_count() == 15);
    CHECK(numbers(read_all(late)) == iota(7, 15));
    CHECK(numbers(read_all(follower)) == iota(7, 15));
    CHECK(follower.missed() == 2);

    // More than a ring's worth in one batch, then a commit with nothing staged.
    REQUIRE(w.stage(make_range(15, 35)));
    REQUIRE(w.commit());
    REQUIRE(w.commit());
    CHECK(numbers(read_all(follower)) == iota(27, 35));
    CHECK(follower.missed() == 14);
    CHECK(follower.backlog() == 0);
}

TEST_CASE("a writer closed with staged events publishes them") {
    xtel_test::temp_dir dir;
    {
        fr::writer w(dir.path(), "agent", 8);
        REQUIRE(w.stage(make_range(0, 3)));
    }
    fr::reader r(dir / "agent");
    CHECK(r.writer_closed());
    CHECK(numbers(read_all(r)) == iota(0, 3));
}

TEST_CASE("a recorder larger than the staging buffer is written as events are staged") {
    xtel_test::temp_dir dir;
    fr::writer w(dir.path(), "agent", 5000);
    REQUIRE(w.stage(make_range(0, 10)));
    CHECK(w.staged() == 0);
    fr::reader r(dir / "agent");
    CHECK(numbers(read_all(r)) == iota(0, 10));
    REQUIRE(w.commit());
}

TEST_CASE("the buffer exporter writes to the output path named by the configuration") {
    xtel_test::temp_dir dir;
    xtel::config cfg;
    cfg.enabled = true;
    cfg.buffer_size = 32;
    cfg.output_path = dir.path().string();
    xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent-x"});
    CHECK(b.path() == dir / "agent-x");
    const auto events = make_range(0, 4);
    b.export_batch(events);
    b.on_flush_end();
    fr::reader r(dir / "agent-x");
    CHECK(r.capacity() == 32);
    CHECK(read_all(r).size() == 4);
}

namespace {

xtel::config buffer_config(const std::filesystem::path& dir) {
    xtel::config cfg;
    cfg.enabled = true;
    cfg.buffer_size = 32;
    cfg.output_path = dir.string();
    return cfg;
}

/// Sets the process umask for the life of the scope.
class scoped_umask {
  public:
    explicit scoped_umask(mode_t m) : old_(::umask(m)) {}
    ~scoped_umask() { ::umask(old_); }
    scoped_umask(const scoped_umask&) = delete;
    scoped_umask& operator=(const scoped_umask&) = delete;

  private:
    mode_t old_;
};

/// The uid and gid of "nobody" on Debian; any id other than root's serves.
constexpr uid_t other_uid = 65534;
constexpr gid_t other_gid = 65534;

}  // namespace

TEST_CASE("the flight recorder file is 0600 even under a umask that lets everyone write") {
    xtel_test::temp_dir dir;
    const scoped_umask open_to_all(0);
    fr::writer w(dir.path(), "agent", 8);
    struct stat st {};
    REQUIRE(::stat((dir / "agent").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
    CHECK(st.st_uid == ::geteuid());
}

TEST_CASE("the writer refuses a dangling symbolic link and creates nothing where it points") {
    xtel_test::temp_dir dir;
    const auto target = dir / "would-be-created";
    std::filesystem::create_symlink(target, dir / "agent");
    CHECK_THROWS_WITH(fr::writer(dir.path(), "agent", 8), Catch::Contains("symbolic link"));
    CHECK_FALSE(std::filesystem::exists(target));
}

TEST_CASE("links planted at guessable temporary names neither block the writer nor are followed") {
    xtel_test::temp_dir dir;
    const auto precious = dir / "precious";
    write_bytes(precious, "keep", 4);
    for (const auto& guess : {".agent.tmp", ".agent.XXXXXX", ".agent.000000"}) {
        std::filesystem::create_symlink(precious, dir / guess);
    }
    const auto planted = dir / (".agent." + std::to_string(::getpid()) + ".tmp");
    std::filesystem::create_symlink(precious, planted);
    fr::writer w(dir.path(), "agent", 8);
    CHECK(std::filesystem::file_size(precious) == 4);
    CHECK(std::filesystem::is_symlink(planted));
    CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir / "agent")));
    // What the writer made is in place, and nothing of it is left under another name.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) {
        ++entries;
    }
    CHECK(entries == 1 + 4 + 1);
}

TEST_CASE("the writer refuses a file of another user at its path and leaves it as it was") {
    if (::geteuid() != 0) {
        WARN("skipped: only root can give a file to another user to set this case up");
        return;
    }
    xtel_test::temp_dir dir;
    const auto path = dir / "agent";
    write_bytes(path, "theirs", 6);
    REQUIRE(::chown(path.c_str(), other_uid, other_gid) == 0);
    CHECK_THROWS_WITH(
        fr::writer(dir.path(), "agent", 8),
        Catch::Contains("belongs to user id 65534") && Catch::Contains("refusing to replace it"));
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(st.st_uid == other_uid);
    CHECK(st.st_size == 6);
}

TEST_CASE(
    "a symbolic link at its path disables the buffer exporter, which logs it and counts "
    "the events it cannot record") {
    xtel_test::temp_dir dir;
    const auto target = dir / "precious";
    write_bytes(target, "keep", 4);
    std::filesystem::create_symlink(target, dir / "agent");
    const xtel_test::log_capture logs;
    const auto cfg = buffer_config(dir.path());
    xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent"});
    const auto errors = logs.at(xtel::log_level::error);
    CHECK(b.disabled());
    CHECK(b.path() == dir / "agent");
    CHECK_THAT(b.error(), Catch::Contains("refusing to replace a symbolic link"));
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains("agent 'agent': flight recorder disabled") &&
                              Catch::Contains(b.error()));
    b.export_batch(make_range(0, 5));
    b.export_batch(make_range(5, 7));
    b.on_flush_end();
    CHECK(b.events_lost() == 7);
    CHECK(std::filesystem::file_size(target) == 4);
    CHECK(std::filesystem::is_symlink(dir / "agent"));
}

TEST_CASE("another user's file at its path disables the buffer exporter and stays as it was") {
    if (::geteuid() != 0) {
        WARN("skipped: only root can give a file to another user to set this case up");
        return;
    }
    xtel_test::temp_dir dir;
    const auto path = dir / "agent";
    write_bytes(path, "theirs", 6);
    REQUIRE(::chown(path.c_str(), other_uid, other_gid) == 0);
    const auto cfg = buffer_config(dir.path());
    xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent"});
    CHECK(b.disabled());
    CHECK_THAT(b.error(), Catch::Contains("belongs to user id 65534"));
    CHECK(std::filesystem::file_size(path) == 6);
}

TEST_CASE("a directory at its path disables the buffer exporter") {
    xtel_test::temp_dir dir;
    std::filesystem::create_directory(dir / "agent");
    const auto cfg = buffer_config(dir.path());
    xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent"});
    CHECK(b.disabled());
    CHECK_THAT(b.error(), Catch::Contains("exists and is not a regular file"));
}

TEST_CASE("the buffer exporter publishes a round's events at the round's end") {
    xtel_test::temp_dir dir;
    auto cfg = buffer_config(dir.path());
    cfg.buffer_size = 16;
    xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent"});
    fr::reader r(dir / "agent");
    b.export_batch(make_range(0, 12));
    b.export_batch(make_range(12, 40));
    CHECK(r.published_count() == 0);
    b.on_flush_end();
    CHECK(r.published_count() == 40);
    CHECK(numbers(read_all(r)) == iota(24, 40));
    CHECK(b.events_lost() == 0);
}

TEST_CASE("an enabled buffer exporter records, loses nothing and reports no error") {
    xtel_test::temp_dir dir;
    const auto cfg = buffer_config(dir.path());
    xtel::buffer_exporter b(xtel::exporter_context{cfg, "agent"});
    b.export_batch(make_range(0, 3));
    b.on_flush_end();
    CHECK_FALSE(b.disabled());
    CHECK(b.events_lost() == 0);
    CHECK(b.error().empty());
}

TEST_CASE("an output directory that does not exist stops the buffer exporter at start-up") {
    xtel_test::temp_dir dir;
    const auto cfg = buffer_config(dir / "missing");
    CHECK_THROWS_AS(xtel::buffer_exporter(xtel::exporter_context{cfg, "agent"}),
                    xtel::config_error);
    CHECK_THROWS_WITH(xtel::buffer_exporter(xtel::exporter_context{cfg, "agent"}),
                      Catch::Contains("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH") &&
                          Catch::Contains("does not exist"));
}

TEST_CASE("an agent name that is not a file name stops the buffer exporter at start-up") {
    xtel_test::temp_dir dir;
    const auto cfg = buffer_config(dir.path());
    using namespace std::string_literals;
    for (const auto& bad : {""s, ".."s, "../escape"s, "a/b"s, "tab\there"s, "nul\0x"s}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(xtel::buffer_exporter(xtel::exporter_context{cfg, bad}),
                        xtel::config_error);
    }
    CHECK(std::filesystem::is_empty(dir.path()));
}

}  // namespace flight_recorder_test
