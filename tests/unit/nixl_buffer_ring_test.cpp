// NIXL's BUFFER ring read by its one reader (xtel/nixl/buffer_ring.hpp) and the directory of
// rings served as agents (xtel/nixl/buffer_rings.hpp), on rings made here in the layout NIXL
// 1.5.1 writes (tests/nixl/files_test.py reads the real NIXL's).

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/nixl/buffer_ring.hpp"
#include "xtel/nixl/buffer_rings.hpp"

namespace nixl_buffer_ring_test {

namespace br = xtel::nixl::buffer_ring;
namespace abi = xtel::nixl::abi_v2;
using abi::event_type;
using xtel::node::file_kind;
using xtel::node::refusal;

namespace {

template <class T>
void put(std::vector<std::uint8_t>& b, std::size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
}

/// A ring of `capacity` slots as NIXL writes it, holding `events` from slot `from` on.
std::vector<std::uint8_t> ring(std::uint64_t capacity,
                               const std::vector<abi::event>& events,
                               std::uint64_t from = 0,
                               std::int32_t version = 4) {
    std::vector<std::uint8_t> b(br::header_size + br::event_size * capacity);
    const std::uint64_t mask = capacity - 1;
    put<std::uint64_t>(b, 0, (from + events.size()) & mask);
    put<std::uint64_t>(b, 8, from);
    put<std::int32_t>(b, 16, version);
    put<std::int32_t>(b, 20, version);
    put<std::uint64_t>(b, 24, capacity);
    put<std::uint64_t>(b, 32, mask);
    for (std::size_t i = 0; i < events.size(); ++i) {
        const std::size_t at = br::header_size + br::event_size * ((from + i) & mask);
        put<std::uint32_t>(b, at, static_cast<std::uint32_t>(events[i].type));
        put<std::uint64_t>(b, at + 8, events[i].value);
    }
    return b;
}

br::checked check(const std::vector<std::uint8_t>& b) {
    return br::check(b, b.size());
}

void write(const std::filesystem::path& p, const std::vector<std::uint8_t>& b) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A descriptor open for reading and writing, closed at the end of its scope.
struct file {
    int fd;
    explicit file(const std::filesystem::path& p) : fd(::open(p.c_str(), O_RDWR | O_CLOEXEC)) {
        REQUIRE(fd >= 0);
    }
    ~file() { ::close(fd); }
};

std::uint64_t read_pos_of(const std::filesystem::path& p) {
    std::uint64_t v = 0;
    const file f(p);
    REQUIRE(::pread(f.fd, &v, sizeof v, 8) == sizeof v);
    return v;
}

const std::vector<abi::event> one_write = {{event_type::xfer_post_time, 3},
                                           {event_type::xfer_time, 40},
                                           {event_type::tx_bytes, 4096},
                                           {event_type::tx_requests_num, 1}};

/// The value of the series of `family` whose labels include `labels`, summed; nullopt: none.
std::optional<double> value_of(const xtel::metrics::snapshot& s,
                               std::string_view family,
                               const std::vector<std::pair<std::string, std::string>>& labels) {
    std::optional<double> sum;
    for (const auto& f : s.families) {
        if (f.spec.name != family) {
            continue;
        }
        const auto& names = f.spec.label_names;
        for (const auto& series : f.series) {
            bool all = true;
            for (const auto& [name, want] : labels) {
                bool found = false;
                for (std::size_t i = 0; i < names.size(); ++i) {
                    found = found || (names[i] == name && series.label_values[i] == want);
                }
                all = all && found;
            }
            if (all) {
                sum = sum.value_or(0) + static_cast<double>(series.value);
            }
        }
    }
    return sum;
}

}  // namespace

TEST_CASE("A NIXL 1.5.1 ring's header is read field by field at NIXL's offsets") {
    const auto c = check(ring(8, one_write, 5));
    REQUIRE(c.what == br::verdict::ok);
    CHECK(c.head.write_pos == 1);  // 5 + 4 events, wrapped at 8
    CHECK(c.head.read_pos == 5);
    CHECK(c.head.version == 4);
    CHECK(c.head.expected_version == 4);
    CHECK(c.head.capacity == 8);
    CHECK(c.head.mask == 7);
    CHECK(check(ring(4, {}, 0, 3)).what == br::verdict::ok);  // version 3: the same header
}

TEST_CASE("A ring of another version, capacity or mask is not NIXL's, and says what is read") {
    const auto v5 = check(ring(8, one_write, 0, 5));
    CHECK(v5.what == br::verdict::not_nixl);
    CHECK(v5.why == "version 5 (expected version 5); xtel reads NIXL's ring versions 3 to 4");
    auto skewed = ring(8, one_write);
    put<std::int32_t>(skewed, 20, 3);  // expected version differs from version
    CHECK(check(skewed).what == br::verdict::not_nixl);
    auto odd = ring(8, one_write);
    put<std::uint64_t>(odd, 24, 6);
    put<std::uint64_t>(odd, 32, 5);
    CHECK(check(odd).why == "capacity 6 events; xtel reads a power of two from 2 to 1048576");
    auto claim = ring(8, one_write);
    put<std::uint64_t>(claim, 24, std::uint64_t{1} << 40);
    put<std::uint64_t>(claim, 32, (std::uint64_t{1} << 40) - 1);
    CHECK(check(claim).what == br::verdict::not_nixl);  // never a 16 TiB read
    auto mask = ring(8, one_write);
    put<std::uint64_t>(mask, 32, 15);
    CHECK(check(mask).why == "mask 15 for capacity 8; NIXL's is the capacity less one");
}

TEST_CASE("A ring truncated, shorter than its header, or with a position outside it is damaged") {
    auto b = ring(8, one_write);
    const auto truncated = br::check(b, b.size() - 16);
    CHECK(truncated.what == br::verdict::damaged);
    CHECK(truncated.why == "152 bytes, where its header's 8 events take 168");
    CHECK(br::check(std::span(b).first(39), b.size()).what == br::verdict::damaged);
    CHECK(br::check(b, b.size() + 1).what == br::verdict::damaged);
    put<std::uint64_t>(b, 0, 8);
    CHECK(check(b).why == "write position 8 and read position 0 in a ring of 8 slots");
}

TEST_CASE("A ring NIXL has sized but not yet written is not ready, not refused") {
    CHECK(check(std::vector<std::uint8_t>(br::header_size + 64)).what == br::verdict::not_ready);
}

TEST_CASE("Draining a wrapped ring takes its events in NIXL's order and gives the slots back") {
    const xtel_test::temp_dir dir;
    const auto path = dir.path() / "agent";
    write(path, ring(4, {one_write[0], one_write[1], one_write[2]}, 2));
    std::vector<abi::event> out;
    {
        const file f(path);
        br::reader r(f.fd);
        REQUIRE(r.drain(out).what == br::verdict::ok);
        REQUIRE(out.size() == 3);
        CHECK(out[0].type == event_type::xfer_post_time);
        CHECK(out[1].value == 40);
        CHECK(out[2].type == event_type::tx_bytes);
        CHECK(out[2].value == 4096);
        out.clear();
        CHECK(r.drain(out).what == br::verdict::ok);
        CHECK(out.empty());  // nothing written since
    }
    CHECK(read_pos_of(path) == 1);  // (2 + 3) mod 4: the write position
}

TEST_CASE("A ring whose header changes or whose file shrinks under its reader is refused") {
    const xtel_test::temp_dir dir;
    const auto path = dir.path() / "agent";
    write(path, ring(8, one_write));
    const file f(path);
    br::reader r(f.fd);
    std::vector<abi::event> out;
    REQUIRE(r.drain(out).what == br::verdict::ok);
    write(path, ring(4, one_write));
    out.clear();
    const auto changed = r.drain(out);
    CHECK(changed.what == br::verdict::damaged);
    CHECK(out.empty());
    REQUIRE(::ftruncate(f.fd, 100) == 0);
    CHECK(r.drain(out).what == br::verdict::damaged);
}

TEST_CASE(
    "A directory of NIXL rings serves each agent's transfers under its name, and refuses "
    "a bad one once") {
    const xtel_test::temp_dir dir;
    write(dir.path() / "initiator", ring(8, one_write));
    write(dir.path() / "bad", ring(8, one_write, 0, 7));
    xtel::nixl::buffer_rings rings(
        {.dir = dir.path(), .program = "test", .allowed_uids = {}, .model = {}});
    auto served = rings.refresh();
    REQUIRE(served.size() == 1);
    CHECK(value_of(*served[0], "xtel_transfer_bytes_total", {{"direction", "tx"}}) == 4096);
    CHECK(value_of(*served[0], "xtel_transfer_requests_total", {{"direction", "tx"}}) == 1);
    CHECK(value_of(*served[0], "xtel_agent_info", {}) == 1);
    for (const auto& f : served[0]->families) {
        for (const auto& n : f.spec.label_names) {
            CHECK(n != "pid");  // the reader's pid is not the agent's
        }
    }
    REQUIRE(!served[0]->labels.empty());
    CHECK(served[0]->labels.front().value == "initiator");
    // NIXL writes another transfer into slots 4 to 7, its write position wrapping to 0.
    {
        const auto more = ring(8, one_write, 4);
        const file f(dir.path() / "initiator");
        REQUIRE(::pwrite(f.fd, more.data() + 40 + 64, 64, 40 + 64) == 64);
        const std::uint64_t write_pos = 0;
        REQUIRE(::pwrite(f.fd, &write_pos, 8, 0) == 8);
    }
    served = rings.refresh();
    REQUIRE(served.size() == 1);
    CHECK(value_of(*served[0], "xtel_transfer_bytes_total", {{"direction", "tx"}}) == 8192);
    CHECK(rings.files().refused(file_kind::nixl_ring, refusal::not_nixl_file) == 1);
    // A file gone is no longer served.
    std::filesystem::remove(dir.path() / "initiator");
    CHECK(rings.refresh().empty());
    CHECK(rings.files().refused(file_kind::nixl_ring, refusal::not_nixl_file) == 1);
}

TEST_CASE("A directory of NIXL rings serves only the families --metrics chooses") {
    const xtel_test::temp_dir dir;
    write(dir.path() / "initiator", ring(8, one_write));
    xtel::nixl::buffer_rings rings({.dir = dir.path(),
                                    .program = "test",
                                    .allowed_uids = {},
                                    .model = {},
                                    .families = {"xtel_transfer_bytes_*"}});
    const auto served = rings.refresh();
    REQUIRE(served.size() == 1);
    REQUIRE(served[0]->families.size() == 1);
    CHECK(served[0]->families[0].spec.name == "xtel_transfer_bytes_total");
    CHECK(value_of(*served[0], "xtel_transfer_bytes_total", {}) == 4096);
}

}  // namespace nixl_buffer_ring_test
