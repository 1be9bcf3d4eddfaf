#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collecting_exporter.hpp"
#include "test_util.hpp"
#include "xtel/core/log.hpp"
#include "xtel/core/telemetry.hpp"

namespace telemetry_test {

using xtel::category;
using xtel::value_kind;
using xtel_test::collecting_exporter;

namespace {

xtel::config enabled_config(std::chrono::milliseconds interval = std::chrono::milliseconds(100)) {
    xtel::config c;
    c.enabled = true;
    c.run_interval = interval;
    return c;
}

const xtel::telemetry_options manual{
    .staging_capacity = 1024, .batch_size = 256, .start_flusher = false};

}  // namespace

TEST_CASE("the disabled pipeline has no exporters and records nothing") {
    STATIC_REQUIRE_FALSE(xtel::telemetry<>::enabled);
    xtel::telemetry<> t(enabled_config(), "disabled");
    t.record(category::custom, "x", 1);
    t.record_transfer(xtel::direction::tx, 1, 2, 3, 4, 5);
    t.flush();
    CHECK(t.stats().events_exported == 0);
}

TEST_CASE("a recorded event reaches the exporter with its fields intact") {
    xtel_test::reset_sink("fields");
    {
        xtel::telemetry<collecting_exporter> t(enabled_config(), "fields", manual);
        t.record_at(1'700'000'000'123'456, category::backend, "ucx_transports_in_use", 42,
                    value_kind::gauge);
        t.flush();
    }
    const auto events = xtel_test::sink_for("fields")->snapshot();
    REQUIRE(events.size() == 1);
    CHECK(events[0].timestamp_us == 1'700'000'000'123'456);
    CHECK(events[0].cat == category::backend);
    CHECK(events[0].kind == value_kind::gauge);
    CHECK(events[0].name_view() == "ucx_transports_in_use");
    CHECK(events[0].value == 42);
}

TEST_CASE("a transfer record expands into the four NIXL transfer events") {
    xtel_test::reset_sink("xfer");
    {
        xtel::telemetry<collecting_exporter> t(enabled_config(), "xfer", manual);
        t.record_transfer(xtel::direction::tx, 1000, 65536, 2, 7, 31);
        t.record_transfer(xtel::direction::rx, 2000, 4096, 1, 3, 9);
        t.flush();
    }
    const auto ev = xtel_test::sink_for("xfer")->snapshot();
    REQUIRE(ev.size() == 8);
    struct expect {
        const char* name;
        category cat;
        value_kind kind;
        std::uint64_t value;
        std::uint64_t ts;
    };
    const expect want[] = {
        {"agent_tx_bytes", category::transfer, value_kind::counter, 65536, 1000},
        {"agent_tx_requests_num", category::transfer, value_kind::counter, 2, 1000},
        {"agent_xfer_time", category::performance, value_kind::sample, 31, 1000},
        {"agent_xfer_post_time", category::performance, value_kind::sample, 7, 1000},
        {"agent_rx_bytes", category::transfer, value_kind::counter, 4096, 2000},
        {"agent_rx_requests_num", category::transfer, value_kind::counter, 1, 2000},
        {"agent_xfer_time", category::performance, value_kind::sample, 9, 2000},
        {"agent_xfer_post_time", category::performance, value_kind::sample, 3, 2000},
    };
    for (std::size_t i = 0; i < 8; ++i) {
        CAPTURE(i);
        CHECK(ev[i].name_view() == want[i].name);
        CHECK(ev[i].cat == want[i].cat);
        CHECK(ev[i].kind == want[i].kind);
        CHECK(ev[i].value == want[i].value);
        CHECK(ev[i].timestamp_us == want[i].ts);
    }
}

TEST_CASE("names longer than the limit are truncated, not overrun") {
    const xtel::event_name n(std::string(100, 'a'));
    CHECK(n.view().size() == xtel::max_name_length);
    CHECK(xtel::event_name("short").view() == "short");
}

TEST_CASE("the flusher delivers events without an explicit flush") {
    xtel_test::reset_sink("periodic");
    auto sink = xtel_test::sink_for("periodic");
    xtel::telemetry<collecting_exporter> t(enabled_config(std::chrono::milliseconds(5)),
                                           "periodic");
    t.add(category::transfer, "agent_tx_bytes", 10);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sink->snapshot().empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const auto ev = sink->snapshot();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].value == 10);
    CHECK(ev[0].kind == value_kind::counter);
}

TEST_CASE("destroying the pipeline flushes every event recorded before it") {
    xtel_test::reset_sink("shutdown");
    {
        // A long interval: only the final flush can deliver these.
        xtel::telemetry<collecting_exporter> t(enabled_config(std::chrono::milliseconds(3'600'000)),
                                               "shutdown");
        for (int i = 0; i < 1000; ++i) {
            t.set(category::memory, "agent_memory_registered", static_cast<std::uint64_t>(i));
        }
    }
    auto sink = xtel_test::sink_for("shutdown");
    const auto ev = sink->snapshot();
    REQUIRE(ev.size() == 1000);
    for (int i = 0; i < 1000; ++i) {
        REQUIRE(ev[static_cast<std::size_t>(i)].value == static_cast<std::uint64_t>(i));
    }
    CHECK(sink->stopped);
}

TEST_CASE("many threads record at once and every event arrives in each thread's order") {
    xtel_test::reset_sink("threads");
    constexpr int threads = 8;
    constexpr std::uint64_t per_thread = 20'000;
    {
        xtel::telemetry<collecting_exporter> t(enabled_config(std::chrono::milliseconds(1)),
                                               "threads",
                                               {.staging_capacity = 1 << 16, .batch_size = 4096});
        std::vector<std::thread> workers;
        for (int w = 0; w < threads; ++w) {
            workers.emplace_back([&t, w] {
                for (std::uint64_t i = 0; i < per_thread; ++i) {
                    t.record(category::custom, "seq", (static_cast<std::uint64_t>(w) << 32) | i);
                }
            });
        }
        for (auto& th : workers) {
            th.join();
        }
        CHECK(t.stats().records_dropped == 0);
    }
    const auto ev = xtel_test::sink_for("threads")->snapshot();
    REQUIRE(ev.size() == threads * per_thread);
    std::map<std::uint64_t, std::uint64_t> next;
    for (const auto& e : ev) {
        const auto w = e.value >> 32;
        const auto i = e.value & 0xffffffffu;
        REQUIRE(i == next[w]);
        ++next[w];
    }
    CHECK(next.size() == threads);
}

TEST_CASE("a full staging ring drops, counts, and reports the count as an event") {
    xtel_test::reset_sink("full");
    std::uint64_t dropped = 0;
    {
        xtel::telemetry<collecting_exporter> t(
            enabled_config(), "full",
            {.staging_capacity = 64, .batch_size = 16, .start_flusher = false});
        // An event takes two of the ring's 64 slots: 32 fit.
        for (int i = 0; i < 100; ++i) {
            t.add(category::transfer, "agent_tx_bytes", 1);
        }
        dropped = t.stats().records_dropped;
        t.flush();
        // Space again after the flush: recording goes on.
        t.add(category::transfer, "agent_tx_bytes", 1);
        t.flush();
        CHECK(t.stats().records_dropped == 68);
    }
    CHECK(dropped == 68);
    const auto ev = xtel_test::sink_for("full")->snapshot();
    REQUIRE(ev.size() == 32 + 1 + 1);
    const auto& report = ev[32];
    CHECK(report.name_view() == "telemetry_events_dropped");
    CHECK(report.cat == category::system);
    CHECK(report.kind == value_kind::counter);
    CHECK(report.value == 68);
    CHECK(ev[33].name_view() == "agent_tx_bytes");
}

TEST_CASE("an exporter that throws is counted and logged once, and the pipeline goes on") {
    xtel_test::reset_sink("throws");
    auto sink = xtel_test::sink_for("throws");
    sink->throw_next = 3;
    xtel_test::log_capture logs;
    {
        xtel::telemetry<collecting_exporter> t(enabled_config(), "throws", manual);
        for (int i = 0; i < 3; ++i) {
            t.add(category::transfer, "agent_tx_bytes", 1);
            t.flush();
        }
        t.add(category::transfer, "agent_tx_bytes", 5);
        t.flush();
        CHECK(t.stats().export_errors == 3);
    }
    const auto ev = sink->snapshot();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].value == 5);
    const auto lines = logs.all();
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("throws") && Catch::Contains("collecting") &&
                             Catch::Contains("disk on fire"));
}

TEST_CASE("an exporter's set-up error propagates from the pipeline's constructor") {
    const auto build = [] {
        xtel::telemetry<collecting_exporter> t(enabled_config(), "refuse-me", manual);
    };
    CHECK_THROWS_AS(build(), xtel::exporter_error);
}

TEST_CASE("a thread that exits leaves its events behind for the flusher") {
    xtel_test::reset_sink("exited");
    {
        xtel::telemetry<collecting_exporter> t(enabled_config(), "exited", manual);
        for (int round = 0; round < 5; ++round) {
            std::thread([&t, round] {
                t.add(category::custom, "round", static_cast<std::uint64_t>(round));
            }).join();
        }
        t.flush();
        t.flush();  // the second flush releases the drained rings of exited threads
    }
    const auto ev = xtel_test::sink_for("exited")->snapshot();
    REQUIRE(ev.size() == 5);
    std::vector<std::uint64_t> values;
    for (const auto& e : ev) {
        values.push_back(e.value);
    }
    std::sort(values.begin(), values.end());
    CHECK(values == std::vector<std::uint64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("two pipelines recorded from one thread keep their events apart") {
    xtel_test::reset_sink("left");
    xtel_test::reset_sink("right");
    {
        xtel::telemetry<collecting_exporter> a(enabled_config(), "left", manual);
        xtel::telemetry<collecting_exporter> b(enabled_config(), "right", manual);
        for (std::uint64_t i = 0; i < 10; ++i) {
            a.add(category::custom, "n", i);
            b.add(category::custom, "n", 100 + i);
        }
    }
    const auto l = xtel_test::sink_for("left")->snapshot();
    const auto r = xtel_test::sink_for("right")->snapshot();
    REQUIRE(l.size() == 10);
    REQUIRE(r.size() == 10);
    for (std::uint64_t i = 0; i < 10; ++i) {
        CHECK(l[i].value == i);
        CHECK(r[i].value == 100 + i);
    }
}

TEST_CASE(
    "more pipelines than a thread's ring cache holds, recorded in turn, keep their events "
    "apart") {
    // Six pipelines against the cache's four ways: every record after the first round finds
    // its ring past the front way, or not cached at all, and brings it to the front.
    constexpr std::size_t count = 6;
    static_assert(count > xtel::detail::ring_registry::cache_ways);
    std::vector<std::string> names;
    for (std::size_t p = 0; p < count; ++p) {
        names.push_back("turn" + std::to_string(p));
        xtel_test::reset_sink(names.back());
    }
    {
        std::vector<std::unique_ptr<xtel::telemetry<collecting_exporter>>> pipes;
        for (const auto& n : names) {
            pipes.push_back(std::make_unique<xtel::telemetry<collecting_exporter>>(enabled_config(),
                                                                                   n, manual));
        }
        for (std::uint64_t i = 0; i < 10; ++i) {
            for (std::size_t p = 0; p < count; ++p) {
                // Twice in a row, then the next: the front way's hit and the miss after it.
                pipes[p]->add(category::custom, "n", 1000 * p + 2 * i);
                pipes[p]->add(category::custom, "n", 1000 * p + 2 * i + 1);
            }
        }
    }
    for (std::size_t p = 0; p < count; ++p) {
        const auto got = xtel_test::sink_for(names[p])->snapshot();
        REQUIRE(got.size() == 20);
        for (std::uint64_t i = 0; i < 20; ++i) {
            CHECK(got[i].value == 1000 * p + i);
        }
    }
}

TEST_CASE("a pipeline made after another is gone never records into the other's ring") {
    // The new pipeline may well sit at the old one's address; its thread's cache still holds
    // the old ring under the old id.
    xtel_test::reset_sink("before");
    xtel_test::reset_sink("after");
    {
        xtel::telemetry<collecting_exporter> a(enabled_config(), "before", manual);
        a.add(category::custom, "n", 1);
    }
    {
        xtel::telemetry<collecting_exporter> b(enabled_config(), "after", manual);
        b.add(category::custom, "n", 2);
        b.add(category::custom, "n", 3);
    }
    const auto before = xtel_test::sink_for("before")->snapshot();
    const auto after = xtel_test::sink_for("after")->snapshot();
    REQUIRE(before.size() == 1);
    CHECK(before[0].value == 1);
    REQUIRE(after.size() == 2);
    CHECK(after[0].value == 2);
    CHECK(after[1].value == 3);
}

namespace {

/// An exporter that asks for whole transfers as well as events.
class transfer_collecting_exporter {
  public:
    static inline std::vector<xtel::transfer_record> transfers;
    static inline std::vector<std::string> backends;
    static inline std::vector<std::string> peers;
    static inline std::size_t events = 0;

    explicit transfer_collecting_exporter(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event> b) { events += b.size(); }
    void export_transfers(std::span<const xtel::transfer_record> t, const xtel::label_table& l) {
        for (const auto& r : t) {
            transfers.push_back(r);
            backends.push_back(l.name(r.attrs.backend));
            peers.push_back(l.name(r.attrs.remote_agent));
        }
    }
};

}  // namespace

TEST_CASE("exporters that ask for transfers get each one whole, with its attributes") {
    STATIC_REQUIRE(xtel::exporter_traits<transfer_collecting_exporter>::wants_transfers);
    STATIC_REQUIRE_FALSE(xtel::exporter_traits<collecting_exporter>::wants_transfers);
    transfer_collecting_exporter::transfers.clear();
    {
        xtel::telemetry<transfer_collecting_exporter> t(enabled_config(), "attrs", manual);
        xtel::transfer_attributes a;
        a.backend = t.labels().intern("ucx");
        a.remote_agent = t.labels().intern("decode-7");
        a.op = xtel::transfer_op::read;
        a.local_memory = xtel::memory_kind::vram;
        a.remote_memory = xtel::memory_kind::dram;
        a.status = xtel::transfer_status::error;
        t.record_transfer(xtel::direction::rx, 77, 4096, 3, 5, 11, a);
        t.record_transfer(xtel::direction::tx, 78, 8192, 1, 2, 4);
        t.flush();
        // The failed transfer makes no events: agent_*_bytes and the rest count completed ones.
        CHECK(t.stats().events_exported == 4);
    }
    const auto& r = transfer_collecting_exporter::transfers;
    REQUIRE(r.size() == 2);
    CHECK(r[0].timestamp_us == 77);
    CHECK(r[0].bytes == 4096);
    CHECK(r[0].requests == 3);
    CHECK(r[0].post_us == 5);
    CHECK(r[0].xfer_us == 11);
    CHECK(r[0].dir == xtel::direction::rx);
    CHECK(r[0].attrs.op == xtel::transfer_op::read);
    CHECK(r[0].attrs.local_memory == xtel::memory_kind::vram);
    CHECK(r[0].attrs.status == xtel::transfer_status::error);
    CHECK(transfer_collecting_exporter::backends[0] == "ucx");
    CHECK(transfer_collecting_exporter::peers[0] == "decode-7");
    CHECK(r[1].attrs == xtel::transfer_attributes{});
    CHECK(transfer_collecting_exporter::backends[1] == "unknown");
    // It has the records, so it gets none of the events derived from them.
    CHECK(transfer_collecting_exporter::events == 0);
}

TEST_CASE(
    "a transfer's descriptors and lanes reach transfer exporters, tagged or not, timed or not") {
    transfer_collecting_exporter::transfers.clear();
    {
        xtel::telemetry<transfer_collecting_exporter> t(enabled_config(), "shape", manual);
        t.record_transfer(xtel::direction::tx, 1, 4096, 1, 2, 3, {}, {}, {65535, 4});
        t.record_transfer(xtel::direction::tx, 2, 4096, 1, 2, 3, {}, "req-1", {7, 1});
        t.record_transfer_counts(xtel::direction::rx, 3, 4096, 2, {}, {}, {300, 255});
        t.record_transfer(xtel::direction::tx, 4, 4096, 1, 2, 3);  // none given
        t.flush();
    }
    const auto& r = transfer_collecting_exporter::transfers;
    REQUIRE(r.size() == 4);
    CHECK(r[0].shape == xtel::transfer_shape{65535, 4});
    CHECK(r[1].shape == xtel::transfer_shape{7, 1});
    CHECK(r[2].shape == xtel::transfer_shape{300, 255});
    CHECK_FALSE(r[2].timed);
    CHECK(r[3].shape == xtel::transfer_shape{});
    // The rest of each record is as it was: the shape shares a store with kind and flags.
    CHECK(r[0].dir == xtel::direction::tx);
    CHECK(r[0].timed);
    CHECK(r[2].dir == xtel::direction::rx);
    CHECK(r[2].requests == 2);
}

// The staged transfer is one 32-byte slot when the thread's attribute cache (16 ways by hash)
// holds its attributes, and two when it carries them; both sides keep the cache in step.
TEST_CASE(
    "transfers keep their attributes and numbers through the attribute cache, whatever the "
    "mix",
    "[staging]") {
    transfer_collecting_exporter::transfers.clear();
    constexpr std::uint64_t sets = 40;  // more than the 16 ways: evictions and collisions
    constexpr std::uint64_t long_time = 5'000'000'000;  // past 32 bits of microseconds
    std::vector<xtel::transfer_attributes> attrs(sets);
    {
        xtel::telemetry<transfer_collecting_exporter> t(enabled_config(), "cache", manual);
        for (std::uint64_t i = 0; i < sets; ++i) {
            attrs[i].backend = t.labels().intern(i % 2 == 0 ? "ucx" : "gds");
            attrs[i].remote_agent = t.labels().intern("peer-" + std::to_string(i % 20));
            attrs[i].op = i % 3 == 0 ? xtel::transfer_op::read : xtel::transfer_op::write;
            attrs[i].status =
                i % 7 == 0 ? xtel::transfer_status::error : xtel::transfer_status::success;
        }
        for (std::uint64_t round = 0; round < 3; ++round) {
            for (std::uint64_t k = 0; k < sets; ++k) {
                const std::uint64_t i = (k * 7 + round) % sets;  // a different order each round
                const std::uint64_t requests = i % 5 == 0 ? 70'000 : 1 + i;
                t.record_transfer(xtel::direction::tx, round, i, requests, i,
                                  i == 5 ? long_time : 2 * i, attrs[i]);
            }
            if (round == 1) {
                t.flush();  // the consumer's copy outlives a flush
            }
        }
        t.flush();
        CHECK(t.stats().records_dropped == 0);
    }
    const auto& r = transfer_collecting_exporter::transfers;
    REQUIRE(r.size() == 3 * sets);
    for (const auto& got : r) {
        const std::uint64_t i = got.bytes;
        REQUIRE(i < sets);
        CAPTURE(i, got.timestamp_us);
        CHECK(got.attrs == attrs[i]);
        CHECK(got.requests == (i % 5 == 0 ? 70'000 : 1 + i));
        CHECK(got.post_us == i);
        // Kept to 32 bits of microseconds (71.6 minutes), saturated.
        CHECK(got.xfer_us == (i == 5 ? 0xffffffffULL : 2 * i));
        CHECK(got.timed);
    }
}

TEST_CASE("a transfer whose attributes the thread used last takes one slot", "[staging]") {
    transfer_collecting_exporter::transfers.clear();
    xtel::telemetry<transfer_collecting_exporter> t(
        enabled_config(), "one_slot",
        {.staging_capacity = 8, .batch_size = 256, .start_flusher = false});
    xtel::transfer_attributes a;
    a.remote_agent = t.labels().intern("decode-1");
    // Two slots (it carries the attributes), then seven of one slot: eight fill the ring.
    for (int i = 0; i < 8; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 4096, 1, 2, 3, a);
    }
    CHECK(t.stats().records_dropped == 1);
    t.flush();
    CHECK(transfer_collecting_exporter::transfers.size() == 7);
}

// A slot of the hot path says only "the set staged last": the producer's last set may change
// only with a slot the consumer will read. Here the dropped transfer's set is in the cache
// (found, one slot) but finds no room; had it become the producer's last, the next transfer
// with it would take the hot path and reach the exporter with the other set.
TEST_CASE("a transfer dropped for want of room leaves the last attribute set as it was",
          "[staging]") {
    transfer_collecting_exporter::transfers.clear();
    xtel::telemetry<transfer_collecting_exporter> t(
        enabled_config(), "last_kept",
        {.staging_capacity = 8, .batch_size = 256, .start_flusher = false});
    xtel::transfer_attributes a;
    a.remote_agent = t.labels().intern("decode-1");
    xtel::transfer_attributes b;
    b.remote_agent = t.labels().intern("decode-2");
    b.op = xtel::transfer_op::read;
    const auto way = [](const xtel::transfer_attributes& x) {
        std::uint64_t w[2];
        std::memcpy(w, &x, sizeof w);
        return xtel::detail::attribute_cache::way_of(w[0], w[1]);
    };
    REQUIRE(way(a) != way(b));  // else storing a evicts b, and b's drop is of two slots
    t.record_transfer(xtel::direction::tx, 1, 1, 1, 2, 3, b);  // two slots: b stored
    t.record_transfer(xtel::direction::tx, 2, 2, 1, 2, 3, a);  // two slots: a stored, last
    for (std::uint64_t i = 0; i < 4; ++i) {
        t.record_transfer(xtel::direction::tx, 3 + i, 3 + i, 1, 2, 3, a);  // one slot each
    }
    CHECK(t.stats().records_dropped == 0);
    t.record_transfer(xtel::direction::tx, 7, 7, 1, 2, 3, b);  // b found; no room
    CHECK(t.stats().records_dropped == 1);
    t.flush();
    // An event: its claim makes room (a transfer's hot path claims only below the mark the
    // last claim that made room set), and it leaves the attribute cache alone.
    t.add(category::custom, "between", 1);
    t.record_transfer(xtel::direction::tx, 8, 8, 1, 2, 3, b);  // b is not the last: one slot
    t.record_transfer(xtel::direction::tx, 9, 9, 1, 2, 3, b);  // now the last: the hot path
    t.record_transfer(xtel::direction::tx, 10, 10, 1, 2, 3, a);
    t.flush();
    const auto& r = transfer_collecting_exporter::transfers;
    REQUIRE(r.size() == 9);
    for (const auto& got : r) {
        CAPTURE(got.bytes);
        const bool with_b = got.bytes == 1 || got.bytes == 8 || got.bytes == 9;
        CHECK(got.attrs == (with_b ? b : a));
    }
}

TEST_CASE("the label table stops growing at its capacity and answers 'other'") {
    xtel::label_table l(3);
    const auto a = l.intern("a");
    CHECK(l.intern("a") == a);
    l.intern("b");
    l.intern("c");
    CHECK(l.intern("d") == xtel::label_table::overflow);
    CHECK(l.name(xtel::label_table::overflow) == "other");
    CHECK(l.name(12345) == "unknown");
    CHECK(l.size() == 5);
}

TEST_CASE(
    "a staging ring past half full wakes the flusher so bursts larger than the ring are "
    "not dropped",
    "[concurrency]") {
    xtel_test::reset_sink("early");
    auto sink = xtel_test::sink_for("early");
    constexpr std::size_t capacity = 1024;  // in events
    // Two bursts overflow the ring unless it is drained in between. One burst on top of what a
    // round may leave staged (fewer than capacity / 2) still fits, so the test does not depend
    // on the flusher getting a core during a burst, only on the early flush that follows it.
    constexpr std::size_t burst = capacity / 2 + 1;
    constexpr std::size_t bursts = 10;
    {
        // An interval of an hour: only early flushes can make room during the test.
        xtel::telemetry<collecting_exporter> t(
            enabled_config(std::chrono::milliseconds(3'600'000)), "early",
            // An event takes two slots.
            {.staging_capacity = 2 * capacity, .batch_size = 256});
        for (std::size_t round = 1; round <= bursts; ++round) {
            for (std::size_t i = 0; i < burst; ++i) {
                t.add(category::transfer, "agent_tx_bytes", 1);
            }
            // Whatever is still staged is below half the ring (a crossing asked for a flush),
            // so everything but fewer than capacity / 2 records must arrive without the interval.
            const auto recorded = round * burst;
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (sink->snapshot().size() + capacity / 2 <= recorded &&
                   std::chrono::steady_clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            REQUIRE(sink->snapshot().size() + capacity / 2 > recorded);
        }
        CHECK(t.stats().records_dropped == 0);
    }
    CHECK(sink->snapshot().size() == bursts * burst);
}

}  // namespace telemetry_test
