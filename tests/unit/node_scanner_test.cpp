// The agents' directory's one scanner (xtel/node/scanner.hpp): which names one listing holds of
// each kind, the trust rules it opens a file by (as listed and as opened), and its one table of
// refusals shared by the collector and the span export.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/node/collector.hpp"
#include "xtel/node/scanner.hpp"

namespace node_scanner_test {

using xtel::node::file_kind;
using xtel::node::refusal;
using xtel::node::scanner;

namespace {

void write_file(const std::filesystem::path& path, std::size_t bytes) {
    std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
}

scanner::settings settings_of(const xtel_test::temp_dir& dir, bool span_rings = true) {
    return {.dir = dir.path(),
            .program = "test",
            .allowed_uids = {},
            .max_file_bytes = 64,
            .span_rings = span_rings};
}

std::vector<std::string> names(const xtel::node::listing& l, file_kind k) {
    std::vector<std::string> out;
    for (const auto& [name, id] : l.of(k)) {
        out.push_back(name);
    }
    return out;
}

}  // namespace

TEST_CASE("one listing holds the node files, notices and span rings by kind, and nothing else",
          "[node_file][scanner]") {
    const xtel_test::temp_dir dir;
    for (const char* name :
         {"a.metrics", "a.metrics.crashed.12", ".a.metrics.tmp", ".metrics", "b.7.unpublished",
          ".b.7.unpublished", "c.spans", ".spans", "c.spans.crashed.3", "d.txt"}) {
        write_file(dir.path() / name, 8);
    }
    scanner files(settings_of(dir));
    const auto first = files.scan();
    REQUIRE(first != nullptr);
    CHECK(names(*first, file_kind::node_file) == std::vector<std::string>{"a.metrics"});
    CHECK(names(*first, file_kind::notice) == std::vector<std::string>{"b.7.unpublished"});
    CHECK(names(*first, file_kind::span_ring) == std::vector<std::string>{"c.spans"});
    CHECK(first->number() == 1);
    CHECK(files.latest() == first);
    const auto second = files.scan();
    CHECK(second->number() == 2);
    CHECK(files.latest() == second);

    // Without a reader of span rings, none is listed (and none refused).
    scanner no_spans(settings_of(dir, false));
    CHECK(no_spans.scan()->of(file_kind::span_ring).empty());
    CHECK_FALSE(no_spans.kind_of("c.spans").has_value());
    CHECK(files.kind_of("c.spans") == file_kind::span_ring);
}

TEST_CASE("a directory that cannot be listed gives no listing and keeps the one before",
          "[node_file][scanner]") {
    const xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    auto s = settings_of(dir);
    s.dir = dir.path() / "sub";
    std::filesystem::create_directory(s.dir);
    scanner files(s);
    const auto listed = files.scan();
    REQUIRE(listed != nullptr);
    std::filesystem::remove(s.dir);
    CHECK(files.scan() == nullptr);
    CHECK(files.scan() == nullptr);
    CHECK(files.latest() == listed);
    CHECK(logs.at(xtel::log_level::error).size() == 1);  // once until it can be read again
}

TEST_CASE("the scanner opens a regular file of an allowed owner within its kind's limit only",
          "[node_file][scanner][hostile]") {
    const xtel_test::temp_dir dir;
    const xtel_test::temp_dir elsewhere;
    write_file(dir.path() / "ok.metrics", 64);
    write_file(dir.path() / "big.metrics", 65);
    write_file(elsewhere.path() / "target.metrics", 8);
    std::filesystem::create_symlink(elsewhere.path() / "target.metrics",
                                    dir.path() / "link.metrics");
    REQUIRE(::mkfifo((dir.path() / "fifo.spans").c_str(), 0600) == 0);
    write_file(dir.path() / "gone.7.unpublished", 8);
    const bool root = ::geteuid() == 0;
    if (root) {
        write_file(dir.path() / "theirs.metrics", 8);
        REQUIRE(::chown((dir.path() / "theirs.metrics").c_str(), 54321, 54321) == 0);
    }
    scanner files(settings_of(dir));
    const auto l = files.scan();
    REQUIRE(l != nullptr);
    std::filesystem::remove(dir.path() / "gone.7.unpublished");

    auto ok = files.open(*l, file_kind::node_file, "ok.metrics");
    CHECK_FALSE(ok.refused.has_value());
    CHECK(ok.fd() >= 0);

    const auto big = files.open(*l, file_kind::node_file, "big.metrics");
    CHECK(big.refused == refusal::too_large);
    CHECK(big.why ==
          "65 bytes, larger than the 64 bytes a node file may have here "
          "(--max-file-bytes); not read");
    CHECK(big.fd() < 0);

    const auto link = files.open(*l, file_kind::node_file, "link.metrics");
    CHECK(link.refused == refusal::not_regular);
    CHECK(link.why == "a symbolic link, not a regular file; not read");

    const auto fifo = files.open(*l, file_kind::span_ring, "fifo.spans");
    CHECK(fifo.refused == refusal::not_regular);
    CHECK(fifo.why == "a FIFO, not a regular file; not read");

    // Gone since it was listed: neither refused nor opened (an agent going away).
    const auto gone = files.open(*l, file_kind::notice, "gone.7.unpublished");
    CHECK_FALSE(gone.refused.has_value());
    CHECK(gone.fd() < 0);

    if (root) {
        const auto theirs = files.open(*l, file_kind::node_file, "theirs.metrics");
        CHECK(theirs.refused == refusal::foreign_owner);
        CHECK(theirs.why ==
              "owned by uid 54321, and only the files of uid 0 are served "
              "(--allow-uid)");
    }
}

TEST_CASE("a file replaced by a link after it was listed is refused as opened, not followed",
          "[node_file][scanner][hostile]") {
    const xtel_test::temp_dir dir;
    const xtel_test::temp_dir elsewhere;
    write_file(dir.path() / "a.spans", 8);
    write_file(elsewhere.path() / "secret", 8);
    scanner files(settings_of(dir));
    const auto l = files.scan();
    REQUIRE(l != nullptr);
    std::filesystem::remove(dir.path() / "a.spans");
    std::filesystem::create_symlink(elsewhere.path() / "secret", dir.path() / "a.spans");

    const auto o = files.open(*l, file_kind::span_ring, "a.spans");
    CHECK(o.refused == refusal::not_regular);
    CHECK(o.why == "a symbolic link, not a regular file; not followed");
    CHECK(o.fd() < 0);
}

TEST_CASE("a span ring's refusal is counted apart from the node files' in the one table",
          "[node_file][scanner][collector]") {
    const xtel_test::temp_dir dir;
    scanner files(settings_of(dir));
    xtel::node::collector c({.dir = dir.path(), .program = "test", .max_file_bytes = 64}, files);
    files.count(file_kind::span_ring, refusal::foreign_owner);
    files.count(file_kind::span_ring, refusal::foreign_owner);
    files.count(file_kind::notice, refusal::bad_notice);
    CHECK(files.refused(file_kind::span_ring, refusal::foreign_owner) == 2);
    CHECK(files.refused(file_kind::node_file, refusal::foreign_owner) == 0);
    // The collector's read errors are its node files' and notices'.
    CHECK(c.read_errors(refusal::foreign_owner) == 0);
    CHECK(c.read_errors(refusal::bad_notice) == 1);
    CHECK(c.read_errors_total() == 1);
}

TEST_CASE("the collector's refresh makes the listing the scanner's other readers take",
          "[node_file][scanner][collector]") {
    const xtel_test::temp_dir dir;
    write_file(dir.path() / "a.spans", 8);
    scanner files(settings_of(dir));
    xtel::node::collector c({.dir = dir.path(), .program = "test", .max_file_bytes = 64}, files);
    CHECK(files.latest() == nullptr);
    c.scan();
    const auto l = files.latest();
    REQUIRE(l != nullptr);
    CHECK(l->number() == 1);
    CHECK(names(*l, file_kind::span_ring) == std::vector<std::string>{"a.spans"});
    c.scan();
    CHECK(files.latest()->number() == 2);
}

TEST_CASE("a collector refuses a scanner that lists another directory or trusts other owners",
          "[node_file][scanner][collector]") {
    const xtel_test::temp_dir dir;
    const xtel_test::temp_dir other;
    scanner files(settings_of(dir));
    using settings = xtel::node::collector::settings;
    CHECK_THROWS_AS(
        xtel::node::collector(settings{.dir = other.path(), .max_file_bytes = 64}, files),
        std::invalid_argument);
    CHECK_THROWS_AS(
        xtel::node::collector(
            settings{.dir = dir.path(), .allowed_uids = {7}, .max_file_bytes = 64}, files),
        std::invalid_argument);
    CHECK_THROWS_WITH(
        xtel::node::collector(settings{.dir = dir.path(), .max_file_bytes = 65}, files),
        Catch::Contains("65 bytes a node file") && Catch::Contains("64 bytes a node file"));
}

}  // namespace node_scanner_test
