// The shape the three owned-file formats share (src/core/owned_file): every writer's header
// begins with the same fields (docs/{buffer,node,trace}-format.md), the writers named after their
// agent check the name alike, and the readers of node files and span rings refuse a writer
// state no writer writes alike.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/node/file.hpp"
#include "xtel/trace/span_ring.hpp"

namespace owned_file_test {

namespace nf = xtel::node::file;
namespace sr = xtel::trace::span_ring;
namespace fr = xtel::flight_recorder;

namespace {

/// The file's first `Header`, as a reader written from the format's document reads it.
template <class Header>
Header header_of(const std::filesystem::path& path) {
    Header h{};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h));
    ::close(fd);
    return h;
}

/// Checks the fields every owned file's header has, as a new writer of `agent` left them.
template <class Header, std::size_t N>
void check_preamble(const Header& h, const char (&magic)[N], std::uint32_t version) {
    CHECK(std::memcmp(h.magic, magic, N) == 0);
    CHECK(h.version == version);
    CHECK(h.header_size == sizeof(Header));
    CHECK(h.writer_pid == static_cast<std::uint32_t>(::getpid()));
    CHECK(h.state == 1);  // open
    CHECK(std::string(h.agent_name) == "rank-7");
    CHECK(h.created_us > 0);
}

/// Writes `state` into the header of the file at `path`.
template <class Header>
void set_state(const std::filesystem::path& path, std::uint32_t state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, &state, sizeof state, offsetof(Header, state)) == sizeof state);
    ::close(fd);
}

}  // namespace

TEST_CASE("every owned file's writer begins its header with the same fields, its own magic",
          "[node_file][span_ring]") {
    const xtel_test::temp_dir dir;
    const nf::writer node(dir.path(), "rank-7");
    check_preamble(header_of<nf::file_header>(node.path()), nf::magic, nf::format_version);
    const sr::writer spans(dir.path(), "rank-7", 4);
    check_preamble(header_of<sr::file_header>(spans.path()), sr::magic, sr::format_version);
    const fr::writer recorder(dir.path(), "rank-7", 4);
    check_preamble(header_of<fr::file_header>(recorder.path()), fr::magic, fr::format_version);
}

TEST_CASE("a node file or span ring writer refuses an agent name with no room for a crashed copy",
          "[node_file][span_ring]") {
    const xtel_test::temp_dir dir;
    // 255 bytes less the suffix and ".crashed.<pid>" (18).
    const std::string node_name(255 - 8 - 18 + 1, 'a');
    CHECK_THROWS_WITH(nf::writer(dir.path(), node_name),
                      "agent name '" + node_name +
                          "' is invalid for a node file: 230 bytes, expected at most 229 (it names "
                          "the file <name>.metrics)");
    CHECK_NOTHROW(nf::writer(dir.path(), node_name.substr(1)));
    const std::string ring_name(255 - 6 - 18 + 1, 'a');
    CHECK_THROWS_WITH(sr::writer(dir.path(), ring_name, 4),
                      "agent name '" + ring_name +
                          "' is invalid for a span ring: 232 bytes, expected at most 231 (it names "
                          "the file <name>.spans)");
    CHECK_NOTHROW(sr::writer(dir.path(), ring_name.substr(1), 4));
}

TEST_CASE("a node file or span ring whose writer state is neither open nor closed is refused",
          "[node_file][span_ring]") {
    const xtel_test::temp_dir dir;
    { const nf::writer w(dir.path(), "a"); }
    { const sr::writer w(dir.path(), "a", 4); }
    const auto node = dir.path() / "a.metrics";
    const auto ring = dir.path() / "a.spans";
    set_state<nf::file_header>(node, 7);
    set_state<sr::file_header>(ring, 7);
    try {
        nf::reader r(node);
        FAIL("a node file in writer state 7 was read");
    } catch (const xtel::format_error& e) {
        CHECK(e.kind() == xtel::file_fault::wrong_format);
        CHECK(std::string(e.what()) ==
              node.string() + ": unknown writer state 7 (expected 1 open or 2 closed)");
    }
    try {
        sr::reader r(ring);
        FAIL("a span ring in writer state 7 was read");
    } catch (const xtel::format_error& e) {
        CHECK(e.kind() == xtel::file_fault::wrong_format);
        CHECK(std::string(e.what()) ==
              ring.string() + ": unknown writer state 7 (expected 1 open or 2 closed)");
    }
}

}  // namespace owned_file_test
