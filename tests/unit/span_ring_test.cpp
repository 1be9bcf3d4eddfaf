// The span ring: spans written and read back whole, the oldest overwritten when the ring is
// full, a reader that falls behind counting what it lost, a reader beside a writer in another
// thread never returning a torn span, and the trust rules and damage a reader refuses.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"
#include "xtel/trace/span_ring.hpp"

namespace span_ring_test {

namespace sr = xtel::trace::span_ring;

namespace {

/// Span number `n`, every field derived from n, so that a reader can tell a torn copy (fields
/// of two spans) from a whole one.
sr::span_record numbered(std::uint64_t n) {
    sr::span_record r;
    for (std::size_t i = 0; i < r.trace.size(); ++i) {
        r.trace[i] = static_cast<std::uint8_t>(n + i);
    }
    r.span[0] = static_cast<std::uint8_t>(n | 1);
    r.start_us = n * 3;
    r.end_us = n * 3 + 1;
    r.bytes = n;
    r.descriptors = static_cast<std::uint32_t>(n % 1000);
    r.operation = static_cast<std::uint8_t>(n % 2);
    sr::set_text(r.agent, "prefill-0");
    sr::set_text(r.remote_agent, "decode-" + std::to_string(n % 7));
    sr::set_text(r.request_id, std::string(40, static_cast<char>('a' + n % 26)));
    return r;
}

bool is_whole(const sr::span_record& r) {
    const sr::span_record expected = numbered(r.bytes);
    return std::memcmp(&r, &expected, sizeof r) == 0;
}

std::vector<std::uint64_t> numbers(const std::vector<sr::span_record>& spans) {
    std::vector<std::uint64_t> out;
    for (const auto& r : spans) {
        out.push_back(r.bytes);
    }
    return out;
}

void write_numbered(sr::writer& w, std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t n = from; n <= to; ++n) {
        const auto r = numbered(n);
        REQUIRE(w.write({&r, 1}));
    }
}

std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
    std::vector<std::uint64_t> out;
    for (std::uint64_t n = from; n <= to; ++n) {
        out.push_back(n);
    }
    return out;
}

}  // namespace

TEST_CASE("a span comes back from the ring exactly as it was written", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "prefill-0", 8);
    sr::span_record r = numbered(1);
    r.status = 7;
    r.rank = 3;
    r.local_rank = 1;
    r.lanes = 4;
    r.kind = static_cast<std::uint8_t>(sr::side::initiator);
    REQUIRE(w.write({&r, 1}));
    sr::reader rd(d / "prefill-0.spans");
    std::vector<sr::span_record> out;
    const auto got = rd.read(out);
    CHECK(got.copied == 1);
    CHECK(got.lost == 0);
    REQUIRE(out.size() == 1);
    CHECK(std::memcmp(&out[0], &r, sizeof r) == 0);
    CHECK(sr::text(out[0].remote_agent) == "decode-1");
    CHECK(rd.agent_name() == "prefill-0");
    CHECK(rd.writer_pid() == static_cast<std::uint32_t>(::getpid()));
    CHECK(rd.slot_count() == 8);
    // Nothing new: nothing read.
    CHECK(rd.read(out).copied == 0);
}

TEST_CASE("the ring file is private, sized for its slots and named after the agent",
          "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "decode-3", 16);
    const auto p = d / "decode-3.spans";
    CHECK(w.path() == p);
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(static_cast<std::uint64_t>(st.st_size) == 256 + 16 * 320);
}

TEST_CASE("a full ring overwrites its oldest spans and a new reader starts at the oldest left",
          "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 8);
    write_numbered(w, 1, 20);
    sr::reader rd(d / "a.spans");
    std::vector<sr::span_record> out;
    const auto got = rd.read(out);
    CHECK(numbers(out) == range(13, 20));
    // What was overwritten before the reader came is no loss of this reader's.
    CHECK(got.lost == 0);
    CHECK(rd.written() == 20);
}

TEST_CASE("a reader that falls behind by more than the ring counts the spans it lost",
          "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 8);
    sr::reader rd(d / "a.spans");
    std::vector<sr::span_record> out;
    write_numbered(w, 1, 3);
    CHECK(rd.read(out).copied == 3);
    write_numbered(w, 4, 23);  // 20 more into 8 slots: 12 gone before the reader looks
    out.clear();
    const auto got = rd.read(out);
    CHECK(numbers(out) == range(16, 23));
    CHECK(got.lost == 12);
    CHECK(rd.lost() == 12);
    for (const auto& r : out) {
        CHECK(is_whole(r));
    }
}

TEST_CASE("a read of at most n spans leaves the rest for the next", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 8);
    sr::reader rd(d / "a.spans");
    write_numbered(w, 1, 5);
    std::vector<sr::span_record> out;
    CHECK(rd.read(out, 2).copied == 2);
    CHECK(rd.read(out, 2).copied == 2);
    CHECK(rd.read(out, 2).copied == 1);
    CHECK(numbers(out) == range(1, 5));
}

TEST_CASE("a batch larger than the ring leaves its last spans", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 4);
    sr::reader rd(d / "a.spans");
    std::vector<sr::span_record> batch;
    for (std::uint64_t n = 1; n <= 10; ++n) {
        batch.push_back(numbered(n));
    }
    REQUIRE(w.write(batch));
    CHECK(w.written() == 10);
    std::vector<sr::span_record> out;
    const auto got = rd.read(out);
    CHECK(numbers(out) == range(7, 10));
    CHECK(got.lost == 6);
}

TEST_CASE("a reader skipped to the latest reads only what is written after", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 8);
    write_numbered(w, 1, 5);
    sr::reader rd(d / "a.spans");
    rd.skip_to_latest();
    write_numbered(w, 6, 7);
    std::vector<sr::span_record> out;
    CHECK(rd.read(out).lost == 0);
    CHECK(numbers(out) == range(6, 7));
}

TEST_CASE("a reader beside a writer never returns a torn span and counts every other one",
          "[span_ring][concurrency]") {
    xtel_test::temp_dir d;
    constexpr std::uint64_t total = 200'000;
    sr::writer w(d.path(), "a", 16);  // small, so that the writer laps the reader often
    sr::reader rd(d / "a.spans");
    std::atomic<bool> done{false};
    std::thread writer_thread([&] {
        // Batches of 1 to 5 spans in turn, as a flusher writes what each interval brought.
        std::vector<sr::span_record> batch;
        std::size_t batch_size = 1;
        for (std::uint64_t n = 1; n <= total; ++n) {
            batch.push_back(numbered(n));
            if (batch.size() == batch_size) {
                (void)w.write(batch);
                batch.clear();
                batch_size = batch_size % 5 + 1;
            }
        }
        (void)w.write(batch);
        done.store(true);
    });
    std::vector<sr::span_record> out;
    std::uint64_t lost = 0;
    std::uint64_t last = 0;
    bool torn = false;
    bool out_of_order = false;
    auto drain = [&] {
        out.clear();
        lost += rd.read(out, 7).lost;
        for (const auto& r : out) {
            torn = torn || !is_whole(r);
            out_of_order = out_of_order || r.bytes <= last;
            last = r.bytes;
        }
        return out.size();
    };
    std::uint64_t copied = 0;
    while (!done.load()) {
        copied += drain();
    }
    writer_thread.join();
    while (const auto n = drain()) {
        copied += n;
    }
    CHECK_FALSE(torn);
    CHECK_FALSE(out_of_order);
    CHECK(last == total);
    CHECK(copied + lost == total);
    CHECK(rd.lost() == lost);
}

TEST_CASE("one writer per ring: a second one is refused naming the first's pid", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 4);
    CHECK_THROWS_WITH(sr::writer(d.path(), "a", 4), Catch::Contains(std::to_string(::getpid())));
}

TEST_CASE("a slot count out of range or an agent name that is no file name is refused",
          "[span_ring]") {
    xtel_test::temp_dir d;
    CHECK_THROWS_AS(sr::writer(d.path(), "a", 0), xtel::config_error);
    CHECK_THROWS_AS(sr::writer(d.path(), "a", sr::max_slot_count + 1), xtel::config_error);
    CHECK_THROWS_AS(sr::writer(d.path(), "../a", 4), xtel::config_error);
}

TEST_CASE("a closed ring says so, and a reader still reads its spans", "[span_ring]") {
    xtel_test::temp_dir d;
    std::unique_ptr<sr::writer> w = std::make_unique<sr::writer>(d.path(), "a", 4);
    write_numbered(*w, 1, 2);
    sr::reader rd(d / "a.spans");
    CHECK(rd.writer_alive());
    CHECK_FALSE(rd.closed());
    w.reset();
    CHECK(rd.closed());
    CHECK_FALSE(rd.writer_alive());
    std::vector<sr::span_record> out;
    CHECK(rd.read(out).copied == 2);
}

TEST_CASE("a writer whose ring was truncated gives up once and writes nothing more",
          "[span_ring]") {
    xtel_test::log_capture logs;
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 4);
    REQUIRE(::truncate((d / "a.spans").c_str(), 100) == 0);
    const auto r = numbered(1);
    CHECK_FALSE(w.write({&r, 1}));
    CHECK(w.failed());
    CHECK_THAT(w.failure(), Catch::Contains("truncated"));
    CHECK_FALSE(w.write({&r, 1}));
    CHECK(std::filesystem::file_size(d / "a.spans") == 100);
    CHECK(logs.at(xtel::log_level::error).size() == 1);
}

TEST_CASE("a reader refuses a link, another format and a file over its limit", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 4);
    std::filesystem::create_symlink(d / "a.spans", d / "link.spans");
    try {
        sr::reader rd(d / "link.spans");
        FAIL("a link was followed");
    } catch (const xtel::format_error& e) {
        CHECK(e.kind() == xtel::file_fault::not_regular);
    }
    try {
        sr::reader rd(d / "a.spans", 256 + 4 * 320 - 1);
        FAIL("a file over the limit was opened");
    } catch (const xtel::format_error& e) {
        CHECK(e.kind() == xtel::file_fault::too_large);
    }
    {
        std::ofstream f(d / "b.spans", std::ios::binary);
        f << std::string(2000, 'x');
    }
    try {
        sr::reader rd(d / "b.spans");
        FAIL("a file of another format was opened");
    } catch (const xtel::format_error& e) {
        CHECK(e.kind() == xtel::file_fault::wrong_format);
    }
}

TEST_CASE("a reader trusts only its own user's rings and the owners it is told of", "[span_ring]") {
    if (::geteuid() != 0) {
        WARN("SKIPPED: giving a file to another uid needs the test to run as root");
        return;
    }
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 4);
    REQUIRE(::chown((d / "a.spans").c_str(), 12345, 12345) == 0);
    try {
        sr::reader rd(d / "a.spans");
        FAIL("another user's file was trusted");
    } catch (const xtel::format_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("owned by uid 12345"));
    }
    const uid_t allowed[] = {12345};
    sr::reader rd(d / "a.spans", sr::reader::no_limit, allowed);
    CHECK(rd.slot_count() == 4);
}

TEST_CASE("a head that goes back or a slot older than the head is damage", "[span_ring]") {
    xtel_test::temp_dir d;
    sr::writer w(d.path(), "a", 4);
    write_numbered(w, 1, 3);
    const auto p = d / "a.spans";
    sr::reader rd(p);
    std::vector<sr::span_record> out;
    REQUIRE(rd.read(out).copied == 3);
    const int fd = ::open(p.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    SECTION("head back") {
        const std::uint64_t head = 1;
        REQUIRE(::pwrite(fd, &head, 8, offsetof(sr::file_header, head)) == 8);
        CHECK_THROWS_WITH(rd.read(out), Catch::Contains("head went back"));
    }
    SECTION("slot older than the head") {
        const std::uint64_t head = 4;  // span 4 (slot 3) was never written: its number is 0
        REQUIRE(::pwrite(fd, &head, 8, offsetof(sr::file_header, head)) == 8);
        CHECK_THROWS_AS(rd.read(out), xtel::format_error);
    }
    ::close(fd);
}

}  // namespace span_ring_test
