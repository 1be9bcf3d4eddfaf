#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collecting_exporter.hpp"
#include "test_util.hpp"
#include "xtel/core/back_end.hpp"
#include "xtel/core/names.hpp"
#include "xtel/core/slot_codec.hpp"
#include "xtel/core/telemetry.hpp"

// The back end fed by a producer that has no ring (a host library's own flush thread), and the
// transfer slot's codec.
namespace back_end_test {

using xtel::category;
using xtel::direction;
using xtel::value_kind;
using xtel_test::collecting_exporter;
using xtel_test::record_keeper;

namespace {

xtel::event counter(std::uint64_t ts, const xtel::event_name& name, std::uint64_t value) {
    xtel::event e;
    e.timestamp_us = ts;
    e.cat = category::transfer;
    e.kind = value_kind::counter;
    e.name = name;
    e.value = value;
    return e;
}

xtel::transfer_record transfer(direction dir, std::uint64_t bytes, bool timed) {
    xtel::transfer_record r;
    r.timestamp_us = 1000 + bytes;
    r.bytes = bytes;
    r.requests = 2;
    r.post_us = timed ? 3 : 0;
    r.xfer_us = timed ? 40 : 0;
    r.dir = dir;
    r.timed = timed;
    return r;
}

}  // namespace

TEST_CASE("a back end fed events without a ring hands them on, in order, in one round") {
    xtel_test::reset_sink("fed-events");
    const xtel::config cfg = xtel_test::enabled_config({});
    xtel::label_table labels;
    xtel::back_end<collecting_exporter> back({cfg, "fed-events"}, labels, 256);
    const std::vector<xtel::event> in{counter(10, xtel::names::agent_tx_bytes, 4096),
                                      counter(11, xtel::names::agent_rx_requests_num, 3)};
    back.take(in);
    back.end_round(0);
    const auto sink = xtel_test::sink_for("fed-events");
    const std::vector<xtel::event> out = sink->snapshot();
    REQUIRE(out.size() == 2);
    CHECK(out[0].timestamp_us == 10);
    CHECK(out[0].name.view() == "agent_tx_bytes");
    CHECK(out[0].value == 4096);
    CHECK(out[1].name.view() == "agent_rx_requests_num");
    CHECK(out[1].value == 3);
    CHECK(sink->flush_ends == 1);
    CHECK(back.rounds() == 1);
    CHECK(back.stats().events_exported == 2);
}

TEST_CASE("a back end fed more events than a batch hands them on in batches of its size") {
    xtel_test::reset_sink("fed-batches");
    const xtel::config cfg = xtel_test::enabled_config({});
    xtel::label_table labels;
    xtel::back_end<collecting_exporter> back({cfg, "fed-batches"}, labels, 4);
    std::vector<xtel::event> in;
    for (std::uint64_t i = 0; i < 10; ++i) {
        in.push_back(counter(i, xtel::names::agent_tx_bytes, i));
    }
    back.take(in);
    back.end_round(0);
    const auto sink = xtel_test::sink_for("fed-batches");
    CHECK(sink->batches == 3);  // 4, 4, then 2 at the round's end
    const std::vector<xtel::event> out = sink->snapshot();
    REQUIRE(out.size() == 10);
    CHECK(out[9].value == 9);
}

TEST_CASE("a back end fed whole transfers gives records to their takers and events to the rest") {
    record_keeper::clear();
    xtel_test::reset_sink("fed-transfers");
    const xtel::config cfg = xtel_test::enabled_config({});
    xtel::label_table labels;
    xtel::back_end<collecting_exporter, record_keeper> back({cfg, "fed-transfers"}, labels, 256);
    std::vector<xtel::transfer_record> in{transfer(direction::tx, 4096, true),
                                          transfer(direction::rx, 512, false),
                                          transfer(direction::tx, 64, true)};
    in[2].attrs.status = xtel::transfer_status::error;
    in[0].attrs.remote_agent = labels.intern("decode-3");
    {
        // The producer's ids are gone before the round ends: the back end keeps copies.
        std::string id0 = "4bf92f3577b34da6a3ce929d0e0e4736";
        std::string id2 = "req-failed";
        in[0].request_id = id0;
        in[2].request_id = id2;
        back.take(in);
    }
    back.end_round(0);

    REQUIRE(record_keeper::records.size() == 3);
    CHECK(record_keeper::records[0].bytes == 4096);
    CHECK(record_keeper::records[1].dir == direction::rx);
    CHECK_FALSE(record_keeper::records[1].timed);
    CHECK(record_keeper::ids ==
          std::vector<std::string>{"4bf92f3577b34da6a3ce929d0e0e4736", "", "req-failed"});
    CHECK(record_keeper::peers[0] == "decode-3");
    CHECK(record_keeper::events == 0);  // it has the records
    CHECK(record_keeper::rounds == 1);

    // The event taker: four events of the timed transfer, two of the untimed, none of the
    // failed one.
    const std::vector<xtel::event> out = xtel_test::sink_for("fed-transfers")->snapshot();
    REQUIRE(out.size() == 6);
    CHECK(out[0].name.view() == "agent_tx_bytes");
    CHECK(out[0].value == 4096);
    CHECK(out[1].name.view() == "agent_tx_requests_num");
    CHECK(out[1].value == 2);
    CHECK(out[2].name.view() == "agent_xfer_time");
    CHECK(out[2].value == 40);
    CHECK(out[3].name.view() == "agent_xfer_post_time");
    CHECK(out[3].value == 3);
    CHECK(out[4].name.view() == "agent_rx_bytes");
    CHECK(out[4].value == 512);
    CHECK(out[5].name.view() == "agent_rx_requests_num");
}

TEST_CASE("each transfer keeps its thread's request id when threads' runs of one id interleave") {
    record_keeper::clear();
    xtel::telemetry<record_keeper> t(
        xtel_test::enabled_config({}), "interleaved-ids",
        {.staging_capacity = 256, .batch_size = 256, .start_flusher = false});
    // A run of one id stages it once (the next transfers say "the id staged last", per ring);
    // the round must hand each transfer its own ring's id, whatever the order of the rings.
    auto record = [&t](std::uint64_t bytes, std::string_view id) {
        t.record_transfer(direction::tx, 1, bytes, 1, 1, 5, {}, id);
    };
    auto on_thread = [](auto f) { std::thread(f).join(); };
    on_thread([&] {
        record(1, "id-a");
        record(2, "id-a");
    });
    on_thread([&] {
        record(10, "id-b");
        record(11, "id-b");
    });
    record(100, "id-c");
    record(101, "id-c");
    on_thread([&] { record(12, "id-b2"); });
    t.flush();
    record(102, "id-c");  // the next round: the id this thread staged last, in a new round
    t.flush();

    std::map<std::uint64_t, std::string> id_of;
    for (std::size_t i = 0; i < record_keeper::records.size(); ++i) {
        id_of[record_keeper::records[i].bytes] = record_keeper::ids[i];
    }
    CHECK(id_of == std::map<std::uint64_t, std::string>{{1, "id-a"},
                                                        {2, "id-a"},
                                                        {10, "id-b"},
                                                        {11, "id-b"},
                                                        {12, "id-b2"},
                                                        {100, "id-c"},
                                                        {101, "id-c"},
                                                        {102, "id-c"}});
    CHECK(record_keeper::rounds == 2);
}

TEST_CASE("a pipeline's submit runs a round with the producer's events and what its rings hold") {
    xtel_test::reset_sink("submitted");
    xtel::telemetry<collecting_exporter> t(
        xtel_test::enabled_config({}), "submitted",
        {.staging_capacity = 64, .batch_size = 256, .start_flusher = false});
    t.record_at(5, category::memory, xtel::names::agent_memory_registered, 8192, value_kind::gauge);
    const std::vector<xtel::event> in{counter(6, xtel::names::agent_tx_bytes, 100)};
    t.submit(std::span<const xtel::event>(in));
    const auto sink = xtel_test::sink_for("submitted");
    const std::vector<xtel::event> out = sink->snapshot();
    REQUIRE(out.size() == 2);
    CHECK(out[0].name.view() == "agent_memory_registered");  // the ring's, drained first
    CHECK(out[1].value == 100);
    CHECK(t.flushes() == 1);
    CHECK(t.stats().events_exported == 2);
}

TEST_CASE("a transfer slot reads back every field it was written with, saturated where it must") {
    namespace d = xtel::detail;
    d::staged_record r{};
    d::transfer_layout::write(r, d::record_kind::transfer_notified_tx, 123456789, 1ULL << 40, 70000,
                              5, 1ULL << 33, d::slot_flag::timed | d::slot_flag::extended, 7,
                              {.descriptors = 300, .lanes = 9});
    const d::staged_transfer s = d::transfer_layout::read(r);
    CHECK(s.timestamp_us == 123456789);
    CHECK(s.bytes == 1ULL << 40);
    CHECK(s.requests == d::slot_layout::max_requests);  // the extension carries the rest
    CHECK(s.post_us == 5);
    CHECK(s.xfer_us == d::slot_layout::max_time_us);
    CHECK(s.way == 7);
    CHECK(s.shape.descriptors == 300);
    CHECK(s.shape.lanes == 9);
    CHECK(s.timed());
    CHECK(s.extended());
    CHECK(s.notified());
    CHECK(s.dir() == direction::tx);
    CHECK(r.kind == d::record_kind::transfer_notified_tx);  // where a drain looks for it
}

}  // namespace back_end_test
