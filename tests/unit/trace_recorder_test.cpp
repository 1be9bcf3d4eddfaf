// The span stage, run with a ring as the back end runs it for the node exporter: which of a
// flush round's transfer records become spans in the agent's span ring, what each span says
// (trace, parent, times, bytes, peer, reason), and what it counts when the budget or the ring
// leaves spans out. The ring is a real file, read back with the real reader.

#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "span_recorder.hpp"
#include "test_util.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/core/transfer_record.hpp"

namespace trace_recorder_test {

namespace tr = xtel::trace;
namespace sr = xtel::trace::span_ring;

namespace {

constexpr std::uint64_t now = 1'700'000'000'000'000;  // µs since the epoch
const std::string parent_tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

tr::sampler_settings settings(std::uint64_t slow_us, double sample, std::uint64_t budget) {
    tr::sampler_settings s;
    s.slow_us = slow_us;
    s.sample = sample;
    s.budget = budget;
    return s;
}

xtel::transfer_record timed(std::uint64_t xfer_us, std::string_view id, xtel::label_id peer) {
    xtel::transfer_record r;
    r.timestamp_us = now;
    r.bytes = 4096;
    r.requests = 1;
    r.post_us = 2;
    r.xfer_us = xfer_us;
    r.attrs.remote_agent = peer;
    r.attrs.op = xtel::transfer_op::read;
    r.timed = true;
    r.request_id = id;
    return r;
}

std::vector<sr::span_record> read_all(const std::filesystem::path& path) {
    sr::reader r(path);
    std::vector<sr::span_record> out;
    r.read(out);
    return out;
}

}  // namespace

TEST_CASE(
    "a timed transfer over the threshold becomes a span in its caller's trace, under its "
    "caller's span",
    "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    const auto peer = labels.intern("decode-3");
    xtel::process_rank rank;
    rank.rank = 12;
    rank.local_rank = 4;
    xtel_test::span_recorder rec(dir.path(), "prefill-0", rank, settings(100, 0.0, 1000), now, 16);
    const std::vector<xtel::transfer_record> round = {timed(250, parent_tp, peer),
                                                      timed(99, parent_tp, peer)};
    rec.record(round, labels, now);

    const auto spans = read_all(dir.path() / "prefill-0.spans");
    REQUIRE(spans.size() == 1);  // 99 µs is under the threshold
    const auto& s = spans[0];
    CHECK(tr::to_hex(s.trace) == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(tr::to_hex(s.parent) == "00f067aa0ba902b7");
    CHECK_FALSE(tr::is_zero(s.span));
    CHECK(s.trace_flags == 1);
    CHECK(s.origin == static_cast<std::uint8_t>(tr::origin::traceparent));
    CHECK(s.reason == static_cast<std::uint8_t>(tr::span_reason::slow));
    CHECK(s.end_us == now);
    CHECK(s.start_us == now - 250);
    CHECK(s.bytes == 4096);
    CHECK(s.operation == static_cast<std::uint8_t>(xtel::transfer_op::read));
    CHECK(s.kind == static_cast<std::uint8_t>(sr::side::initiator));
    CHECK(s.status == 0);
    CHECK(s.rank == 12);
    CHECK(s.local_rank == 4);
    CHECK(sr::text(s.agent) == "prefill-0");
    CHECK(sr::text(s.remote_agent) == "decode-3");
    CHECK(sr::text(s.request_id) == parent_tp);
    CHECK(rec.counts().kept[static_cast<std::size_t>(tr::span_reason::slow)] == 1);
    CHECK(rec.counts().dropped_budget == 0);
}

TEST_CASE("a transfer tagged with a plain request id gets the trace id derived from it",
          "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    xtel_test::span_recorder rec(dir.path(), "a", {}, settings(0, 0.0, 1000), now, 16);
    const std::vector<xtel::transfer_record> round = {timed(5, "req-42", 0)};
    rec.record(round, labels, now);
    const auto spans = read_all(dir.path() / "a.spans");
    REQUIRE(spans.size() == 1);
    CHECK(tr::to_hex(spans[0].trace) == "fd1180d9f0c0819f00056b7b9de19fce");  // the doc's vector
    CHECK(tr::is_zero(spans[0].parent));
    CHECK(spans[0].origin == static_cast<std::uint8_t>(tr::origin::derived));
    CHECK(spans[0].rank == -1);
    CHECK(spans[0].local_rank == -1);
    CHECK(sr::text(spans[0].remote_agent).empty());
}

TEST_CASE(
    "a failed transfer becomes a span, timed or not; an untimed one that succeeded never "
    "does",
    "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    xtel_test::span_recorder rec(dir.path(), "a", {}, settings(0, 1.0, 1000), now, 16);
    auto failed = timed(0, "req-1", 0);
    failed.timed = false;
    failed.xfer_us = 0;
    failed.attrs.status = xtel::failed_with(xtel::status_code::timed_out);
    auto counted = timed(0, "", 0);  // a record of untimed completions
    counted.timed = false;
    counted.requests = 200;
    counted.bytes = 200 * 4096;
    auto untagged_failed = failed;
    untagged_failed.request_id = {};
    const std::vector<xtel::transfer_record> round = {failed, counted, untagged_failed};
    rec.record(round, labels, now);
    const auto spans = read_all(dir.path() / "a.spans");
    REQUIRE(spans.size() == 2);
    for (const auto& s : spans) {
        CHECK(s.reason == static_cast<std::uint8_t>(tr::span_reason::failed));
        CHECK(s.status == static_cast<std::uint8_t>(xtel::status_code::timed_out));
        CHECK(s.start_us == now);  // no times: the span is the moment it failed
        CHECK(s.end_us == now);
    }
    CHECK(spans[0].trace == tr::derive_trace_id("req-1"));
    // The untagged one has a trace of its own, random, never zero.
    CHECK_FALSE(tr::is_zero(spans[1].trace));
    CHECK(spans[1].trace != spans[0].trace);
    CHECK(spans[1].origin == 0);
    CHECK(rec.counts().kept[static_cast<std::size_t>(tr::span_reason::failed)] == 2);
}

TEST_CASE("a timed record that carries earlier untimed completions spans one transfer's bytes",
          "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    xtel_test::span_recorder rec(dir.path(), "a", {}, settings(0, 0.0, 1000), now, 16);
    auto r = timed(40, "req-7", 0);
    r.requests = 256;
    r.bytes = 256 * 65536;
    const std::vector<xtel::transfer_record> round = {r};
    rec.record(round, labels, now);
    const auto spans = read_all(dir.path() / "a.spans");
    REQUIRE(spans.size() == 1);
    CHECK(spans[0].bytes == 65536);
}

TEST_CASE("spans over the budget are dropped and counted, each span id is new",
          "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    xtel_test::span_recorder rec(dir.path(), "a", {}, settings(0, 0.0, 5), now, 64);
    const std::vector<xtel::transfer_record> round(12, timed(10, "req-1", 0));
    rec.record(round, labels, now);  // the bucket holds 5 at the start
    const auto spans = read_all(dir.path() / "a.spans");
    CHECK(spans.size() == 5);
    CHECK(rec.counts().kept[static_cast<std::size_t>(tr::span_reason::slow)] == 5);
    CHECK(rec.counts().dropped_budget == 7);
    std::set<std::string> ids;
    for (const auto& s : spans) {
        ids.insert(tr::to_hex(s.span));
    }
    CHECK(ids.size() == 5);
}

TEST_CASE("spans kept after the ring's file was lost are counted as dropped, not written",
          "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    xtel_test::span_recorder rec(dir.path(), "a", {}, settings(0, 0.0, 1000), now, 16);
    const std::vector<xtel::transfer_record> round(3, timed(10, "req-1", 0));
    rec.record(round, labels, now);
    std::filesystem::remove(dir.path() / "a.spans");
    const xtel_test::log_capture quiet;
    rec.record(round, labels, now);
    rec.record(round, labels, now);
    CHECK(rec.failed());
    CHECK(rec.counts().kept[static_cast<std::size_t>(tr::span_reason::slow)] == 3);
    CHECK(rec.counts().dropped_ring == 6);
}

TEST_CASE("a second recorder of the same agent name in the directory is refused",
          "[trace_recorder]") {
    const xtel_test::temp_dir dir;
    const xtel_test::span_recorder first(dir.path(), "a", {}, settings(0, 0.0, 1000), now, 16);
    CHECK_THROWS_WITH(
        xtel_test::span_recorder(dir.path(), "a", {}, settings(0, 0.0, 1000), now, 16),
        Catch::Contains("a.spans"));
}

}  // namespace trace_recorder_test
