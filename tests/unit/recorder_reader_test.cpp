// The pread reader against files made byte by byte: the claim rule, a write sequence that goes
// backwards, a file that shrinks under it, capacities that cannot be, the writer's lock.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace recorder_reader_test {

namespace fr = xtel::flight_recorder;

namespace {

/// A version-2 recorder file written field by field, as a writer would leave it.
struct recorder_file {
    std::filesystem::path path;
    fr::file_header header{};
    std::vector<fr::slot> slots;

    recorder_file(std::filesystem::path p, std::uint64_t capacity)
        : path(std::move(p)), slots(capacity) {
        std::memcpy(header.magic, fr::magic, sizeof fr::magic);
        header.version = fr::format_version;
        header.header_size = fr::header_size;
        header.slot_size = fr::slot_size;
        header.event_size = sizeof(xtel::event);
        header.capacity = capacity;
        header.writer_pid = 4242;
        header.state = static_cast<std::uint32_t>(fr::writer_state::open);
    }

    /// Puts events [from, to) in their slots, published; write_seq = claim_seq = to.
    void publish(std::uint64_t from, std::uint64_t to) {
        for (auto n = from; n < to; ++n) {
            auto& s = slots[n % slots.size()];
            s.seq = n + 1;
            s.ev.timestamp_us = 1'000'000 + n;
            s.ev.value = n;
            s.ev.name = "e";
        }
        header.write_seq = to;
        header.claim_seq = to;
    }

    void save() const {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(::pwrite(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header));
        const auto bytes = static_cast<ssize_t>(slots.size() * sizeof(fr::slot));
        REQUIRE(::pwrite(fd, slots.data(), static_cast<std::size_t>(bytes), fr::header_size) ==
                bytes);
        ::close(fd);
    }
};

std::vector<std::uint64_t> values(fr::reader& r) {
    std::vector<std::uint64_t> v;
    r.poll([&](const xtel::event& e) { v.push_back(e.value); });
    return v;
}

}  // namespace

TEST_CASE("the pread reader counts events whose slots are claimed for newer ones as missed") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 4);
    f.publish(0, 4);
    // The writer has claimed events 4 and 5, whose slots are those of events 0 and 1: their
    // bytes may be half rewritten, so they must not be delivered, even though seq still matches.
    f.header.claim_seq = 6;
    f.save();
    fr::reader r(f.path);
    CHECK(values(r) == std::vector<std::uint64_t>{2, 3});
    CHECK(r.missed() == 2);
    CHECK(r.position() == 4);
}

TEST_CASE("the pread reader delivers at most max_events per poll and reports the backlog") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 8);
    f.publish(0, 7);
    f.save();
    fr::reader r(f.path);
    std::vector<std::uint64_t> got;
    CHECK(r.poll([&](const xtel::event& e) { got.push_back(e.value); }, 3) == 3);
    CHECK(r.backlog() == 4);
    CHECK(r.poll([&](const xtel::event& e) { got.push_back(e.value); }) == 4);
    CHECK(r.backlog() == 0);
    CHECK(got == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6});
    CHECK(r.missed() == 0);
}

TEST_CASE("the pread reader reads a wrapped ring in order, across the wrap") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 5);
    f.publish(0, 13);
    f.save();
    fr::reader r(f.path);
    CHECK(values(r) == std::vector<std::uint64_t>{8, 9, 10, 11, 12});
    CHECK(r.missed() == 8);
}

TEST_CASE("a write sequence that goes backwards is reported as a damaged file") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 4);
    f.publish(0, 4);
    f.save();
    fr::reader r(f.path);
    CHECK(values(r).size() == 4);
    f.header.write_seq = 2;
    f.save();
    CHECK_THROWS_WITH(values(r), Catch::Contains("damaged") &&
                                     Catch::Contains("write_seq went back from 4 to 2"));
}

TEST_CASE("a file that shrinks under the pread reader is a clear error, not a signal") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 64);
    f.publish(0, 10);
    f.save();
    fr::reader r(f.path);
    REQUIRE(std::filesystem::file_size(f.path) == fr::header_size + 64 * fr::slot_size);
    SECTION("below the ring") {
        std::filesystem::resize_file(f.path, fr::header_size + 5 * fr::slot_size);
        CHECK_THROWS_WITH(values(r),
                          Catch::Contains("damaged: truncated to 448 bytes while being read"));
    }
    SECTION("below the header") {
        std::filesystem::resize_file(f.path, 0);
        CHECK_THROWS_AS(values(r), fr::format_error);
        CHECK_THROWS_AS(r.writer_closed(), fr::format_error);
    }
}

TEST_CASE("a capacity whose size overflows is refused at open as absurd") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 1);
    f.header.capacity = std::uint64_t{1} << 59;  // 2^59 * 64 wraps around to 0
    f.save();
    CHECK_THROWS_WITH(fr::reader(f.path), Catch::Contains("absurd capacity 576460752303423488"));
}

TEST_CASE("a capacity larger than the file is refused at open") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 2);
    f.header.capacity = 3;
    f.save();
    CHECK_THROWS_WITH(fr::reader(f.path),
                      Catch::Contains("256 bytes cannot hold the 3 events the header declares"));
}

TEST_CASE("writer_gone is true only for an open file whose lock nobody holds") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 2);
    f.save();
    fr::reader r(f.path);
    const int writer_fd = ::open(f.path.c_str(), O_RDONLY);
    REQUIRE(::flock(writer_fd, LOCK_EX | LOCK_NB) == 0);
    CHECK_FALSE(r.writer_gone());
    ::close(writer_fd);  // the writer's process ends: the lock goes with it
    CHECK(r.writer_gone());
    CHECK(r.writer_pid() == 4242);
    f.header.state = static_cast<std::uint32_t>(fr::writer_state::closed);
    f.save();
    CHECK_FALSE(r.writer_gone());
    CHECK(r.writer_closed());
}

TEST_CASE("replaced is true once the path names another file or none") {
    xtel_test::temp_dir dir;
    recorder_file f(dir / "rec", 2);
    f.save();
    fr::reader r(f.path);
    CHECK_FALSE(r.replaced());
    std::filesystem::rename(f.path, dir / "old");
    CHECK(r.replaced());
    f.save();
    CHECK(r.replaced());
}

}  // namespace recorder_reader_test
