#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>
#include <vector>

#include "nixl/event_mapping.hpp"
#include "nixl/xtel_exporter.hpp"
#include "test_util.hpp"
#include "xtel/core/version.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/nixl/abi_v2.hpp"
#include "xtel/node/file.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

extern "C" xtel::nixl::abi_v2::plugin* nixl_telemetry_plugin_init();

// xtel's NIXL plug-in without NIXL: NIXL's events mapped onto xtel's, and the exporter driven
// through the ABI's base class as NIXL's flush drives it (tests/nixl/plugin_test.py runs the
// real NIXL).
namespace nixl_exporter_test {

namespace abi = xtel::nixl::abi_v2;
using abi::event_type;
using xtel::direction;

namespace {

abi::event ev(event_type t, std::uint64_t v) {
    return abi::event{t, v};
}

xtel::nixl::mapped_flush mapped(const std::vector<abi::event>& in) {
    xtel::nixl::mapped_flush out;
    xtel::nixl::map_flush(in, 777, out);
    return out;
}

/// One flush as NIXL 1.5.1 makes it, through the base class NIXL holds.
void flush(abi::exporter& e, const std::vector<abi::event>& events) {
    abi::exporter_access::begin(e);
    for (const abi::event& x : events) {
        CHECK(e.export_event(x) == abi::status::success);
    }
    abi::exporter_access::end(e);
}

/// The sum of the values of `family`'s series in the node file `file` last published.
std::uint64_t served_total(const std::filesystem::path& file, std::string_view family) {
    xtel::node::file::reader r(file);
    const auto p = r.read_latest();
    REQUIRE(p);
    std::uint64_t total = 0;
    for (const auto& f : xtel::metrics::decode_snapshot(p->payload).families) {
        if (f.spec.name == family) {
            for (const auto& s : f.series) {
                total += s.value;
            }
        }
    }
    return total;
}

const std::vector<abi::event> one_write = {
    ev(event_type::xfer_post_time, 3), ev(event_type::xfer_time, 40),
    ev(event_type::tx_bytes, 4096), ev(event_type::tx_requests_num, 1)};

}  // namespace

TEST_CASE("NIXL's four events of a transfer in NIXL 1.5.1's order are one timed transfer") {
    const auto out = mapped(one_write);
    REQUIRE(out.transfers.size() == 1);
    const xtel::transfer_record& r = out.transfers[0];
    CHECK(r.bytes == 4096);
    CHECK(r.requests == 1);
    CHECK(r.xfer_us == 40);
    CHECK(r.post_us == 3);
    CHECK(r.dir == direction::tx);
    CHECK(r.attrs.op == xtel::transfer_op::write);
    CHECK(r.timed);
    CHECK(r.timestamp_us == 777);
    CHECK(out.events.empty());
}

TEST_CASE("adjacent transfers part where a role repeats and a lone byte event is untimed") {
    const auto out = mapped({ev(event_type::xfer_post_time, 2), ev(event_type::xfer_time, 10),
                             ev(event_type::rx_bytes, 512), ev(event_type::rx_requests_num, 1),
                             ev(event_type::xfer_post_time, 4), ev(event_type::xfer_time, 20),
                             ev(event_type::rx_bytes, 1024), ev(event_type::rx_requests_num, 1),
                             ev(event_type::tx_bytes, 64), ev(event_type::rx_bytes, 8)});
    REQUIRE(out.transfers.size() == 4);
    CHECK(out.transfers[0].bytes == 512);
    CHECK(out.transfers[0].xfer_us == 10);
    CHECK(out.transfers[1].bytes == 1024);
    CHECK(out.transfers[1].post_us == 4);
    CHECK(out.transfers[1].dir == direction::rx);
    CHECK(out.transfers[1].attrs.op == xtel::transfer_op::read);
    // NIXL_TELEMETRY_ENABLED_METRICS left the rest out: one transfer each, not timed.
    CHECK(out.transfers[2].bytes == 64);
    CHECK(out.transfers[2].dir == direction::tx);
    CHECK(out.transfers[2].requests == 0);  // NIXL's requests events, exactly
    CHECK_FALSE(out.transfers[2].timed);
    CHECK(out.transfers[3].dir == direction::rx);  // another direction: another transfer
}

TEST_CASE(
    "memory error and dropped events keep their values and kinds xtel cannot name are NIXL's") {
    const auto out =
        mapped({ev(event_type::memory_registered, 8192), ev(event_type::memory_deregistered, 4096),
                ev(event_type::err_backend, 1), ev(event_type::err_canceled, 2),
                ev(event_type::err_mismatch, 1), ev(event_type::telemetry_events_dropped, 5),
                ev(static_cast<event_type>(99), 1)});
    REQUIRE(out.events.size() == 7);
    CHECK(out.events[0].name.view() == "agent_memory_registered");
    CHECK(out.events[0].cat == xtel::category::memory);
    CHECK(out.events[0].kind == xtel::value_kind::counter);
    CHECK(out.events[0].value == 8192);
    CHECK(out.events[1].name.view() == "agent_memory_deregistered");
    CHECK(out.events[2].name.view() == "agent_error_backend_error");
    CHECK(out.events[2].cat == xtel::category::error);
    CHECK(out.events[3].name.view() == "agent_error_timed_out");  // NIXL_ERR_CANCELED
    CHECK(out.events[3].value == 2);
    // NIXL_ERR_MISMATCH, and a type NIXL does not define: under NIXL's names, served.
    CHECK(out.events[4].name.view() == "nixl_unmapped_mismatch");
    CHECK(out.events[4].cat == xtel::category::error);
    CHECK(out.events[5].name.view() == "telemetry_events_dropped");
    CHECK(out.events[5].value == 5);
    CHECK(out.events[6].name.view() == "nixl_unmapped_undefined");
    CHECK(out.events[6].cat == xtel::category::system);
    CHECK(out.events[6].value == 1);
    CHECK(out.unmapped == 2);
    CHECK(out.transfers.empty());
}

TEST_CASE("an exporter whose output directory is not there counts and drops and never throws") {
    const abi::init_params params{"nixl-no-dir", 4096};
    xtel::nixl::xtel_exporter x(
        params, xtel_test::env_table({{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", "/nonexistent"}}));
    CHECK(x.pipeline_or_null() == nullptr);
    CHECK(x.max_events_buffered() == 4096);
    flush(x, one_write);
    CHECK(x.export_event(ev(event_type::memory_registered, 1)) == abi::status::success);
    CHECK(x.events_dropped() == 5);
}

TEST_CASE("an exporter submits each NIXL flush and each event outside one as a round") {
    xtel_test::temp_dir dir;
    const abi::init_params params{"nixl-rounds", 16};
    xtel::nixl::xtel_exporter x(
        params,
        xtel_test::env_table({{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}}),
        std::chrono::milliseconds(0));  // a round for every flush
    REQUIRE(x.pipeline_or_null() != nullptr);
    CHECK(std::filesystem::exists(dir.path() / "nixl-rounds.metrics"));
    flush(x, one_write);  // transfers only: one round
    CHECK(x.pipeline_or_null()->flushes() == 1);
    flush(x, {});  // an empty flush is a round, as the pipeline's own flusher would run
    CHECK(x.pipeline_or_null()->flushes() == 2);
    // NIXL 1.4 calls no batch hooks: each event is its own round.
    CHECK(x.export_event(ev(event_type::memory_registered, 4096)) == abi::status::success);
    CHECK(x.pipeline_or_null()->flushes() == 3);
    CHECK(x.events_dropped() == 0);
    CHECK(x.events_unmapped() == 0);
}

TEST_CASE("NIXL flushes closer than the round interval are one round, and none is lost") {
    xtel_test::temp_dir dir;
    const abi::init_params params{"nixl-coalesced", 4096};
    const auto file = dir.path() / "nixl-coalesced.metrics";
    {
        xtel::nixl::xtel_exporter x(
            params,
            xtel_test::env_table({{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}}),
            std::chrono::milliseconds(300));
        REQUIRE(x.pipeline_or_null() != nullptr);
        flush(x, one_write);  // the first is a round at once
        CHECK(x.pipeline_or_null()->flushes() == 1);
        CHECK(served_total(file, "xtel_transfer_requests_total") == 1);
        for (int i = 0; i < 9; ++i) {  // NIXL's 10 ms flushes: kept for the next round
            flush(x, one_write);
        }
        flush(x, {ev(event_type::memory_registered, 4096)});
        CHECK(x.pipeline_or_null()->flushes() == 1);
        CHECK(served_total(file, "xtel_transfer_requests_total") == 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(350));
        flush(x, one_write);  // due: the kept batches and this one, one round
        CHECK(x.pipeline_or_null()->flushes() == 3);  // transfers, then the events
        CHECK(served_total(file, "xtel_transfer_requests_total") == 11);
        CHECK(served_total(file, "xtel_memory_registrations_total") == 1);
        flush(x, one_write);  // kept again, until the exporter goes
        CHECK(x.events_dropped() == 0);
    }
    CHECK(served_total(file, "xtel_transfer_requests_total") == 12);
    CHECK(served_total(file, "xtel_transfer_bytes_total") == 12 * 4096);
}

TEST_CASE("events from a second thread during a batch and outside one are each counted once",
          "[concurrency]") {
    xtel_test::temp_dir dir;
    const abi::init_params params{"nixl-threads", 4096};
    constexpr int writes = 500;
    constexpr int registrations = 300;
    {
        xtel::nixl::xtel_exporter x(
            params,
            xtel_test::env_table({{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}}));
        REQUIRE(x.pipeline_or_null() != nullptr);
        abi::exporter& base = x;
        abi::exporter_access::begin(base);
        // Another thread's hooks and events while this one's batch is open: each event its own
        // round, never the batch's, and the batch goes on without a lock.
        std::thread other([&base] {
            abi::exporter_access::begin(base);  // the batch is another thread's: begins nothing
            for (int i = 0; i < registrations; ++i) {
                base.export_event(ev(event_type::memory_registered, 2));
            }
            abi::exporter_access::end(base);  // not its batch: ends nothing
        });
        for (int i = 0; i < writes; ++i) {
            for (const abi::event& e : one_write) {
                base.export_event(e);
            }
        }
        other.join();
        abi::exporter_access::end(base);
        base.export_event(ev(event_type::memory_registered, 7));  // outside a batch: alone
        CHECK(x.pipeline_or_null()->flushes() == registrations + 2);
        CHECK(x.events_dropped() == 0);
    }
    const auto file = dir.path() / "nixl-threads.metrics";
    CHECK(served_total(file, "xtel_memory_registrations_total") == registrations + 1);
    CHECK(served_total(file, "xtel_memory_registered_bytes") == 2 * registrations + 7);
    CHECK(served_total(file, "xtel_transfer_requests_total") == writes);
    CHECK(served_total(file, "xtel_transfer_bytes_total") == 4096 * writes);
}

TEST_CASE("a batch NIXL never ended is submitted when the exporter is destroyed") {
    xtel_test::temp_dir dir;
    const abi::init_params params{"nixl-unended", 4096};
    {
        xtel::nixl::xtel_exporter x(
            params,
            xtel_test::env_table({{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}}));
        abi::exporter& base = x;
        flush(base, one_write);
        abi::exporter_access::begin(base);
        for (const abi::event& e : one_write) {
            base.export_event(e);
        }
        base.export_event(ev(event_type::memory_registered, 4096));
        CHECK(x.pipeline_or_null()->flushes() == 1);  // the batch is still open
    }
    const auto file = dir.path() / "nixl-unended.metrics";
    CHECK(served_total(file, "xtel_transfer_requests_total") == 2);
    CHECK(served_total(file, "xtel_transfer_bytes_total") == 2 * 4096);
    CHECK(served_total(file, "xtel_memory_registrations_total") == 1);
}

/// The spans and served totals of a NIXL agent that made `fast` writes of 20 µs and `slow` of
/// 40 µs in one flush, with NIXL_TELEMETRY_TRACE_SLOW_US=30 and TRACE_SAMPLE=`sample`.
struct spans_seen {
    std::size_t in_ring = 0;
    std::uint64_t counted = 0;
    std::uint64_t requests = 0;
    std::uint64_t bytes = 0;
};
spans_seen run_with_spans(const char* sample, int fast, int slow) {
    xtel_test::temp_dir dir;
    const xtel_test::scoped_env slow_us(xtel::trace::env::trace_slow_us, "30");
    const xtel_test::scoped_env fraction(xtel::trace::env::trace_sample, sample);
    const abi::init_params params{"nixl-spans", 4096};
    {
        xtel::nixl::xtel_exporter x(
            params,
            xtel_test::env_table({{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}}));
        REQUIRE(x.pipeline_or_null() != nullptr);
        std::vector<abi::event> events;
        for (int i = 0; i < fast + slow; ++i) {
            const std::uint64_t xfer = i < slow ? 40 : 20;
            events.insert(events.end(),
                          {ev(event_type::xfer_post_time, 3), ev(event_type::xfer_time, xfer),
                           ev(event_type::tx_bytes, 4096), ev(event_type::tx_requests_num, 1)});
        }
        flush(x, events);
        CHECK(x.events_dropped() == 0);
    }
    spans_seen seen;
    xtel::trace::span_ring::reader ring(dir.path() / "nixl-spans.spans");
    std::vector<xtel::trace::span_ring::span_record> spans;
    ring.read(spans);
    seen.in_ring = spans.size();
    const auto file = dir.path() / "nixl-spans.metrics";
    seen.counted = served_total(file, "xtel_trace_spans_total");
    seen.requests = served_total(file, "xtel_transfer_requests_total");
    seen.bytes = served_total(file, "xtel_transfer_bytes_total");
    return seen;
}

TEST_CASE("the plug-in's slow and sampled transfers become spans and every transfer is counted",
          "[spans]") {
    // Summed transfers and the records kept for spans add up to every transfer, once.
    const spans_seen slow_only = run_with_spans("0", 400, 40);
    CHECK(slow_only.in_ring == 40);
    CHECK(slow_only.counted == 40);
    CHECK(slow_only.requests == 440);
    CHECK(slow_only.bytes == 440 * 4096);
    // Every trace sampled: each fast transfer drawn once, not again by the span stage.
    const spans_seen all = run_with_spans("1", 400, 40);
    CHECK(all.in_ring == 440);
    CHECK(all.counted == 440);
    CHECK(all.requests == 440);
}

TEST_CASE("the plug-in's entry point is NIXL's API version 2 named xtel and always creates") {
    const abi::plugin* p = nixl_telemetry_plugin_init();
    REQUIRE(p != nullptr);
    CHECK(p->api == abi::api_version::v2);
    CHECK(p->name == "xtel");
    CHECK(p->version == xtel::version());
    CHECK(nixl_telemetry_plugin_init() == p);  // static: NIXL keeps the pointer
    ::setenv("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", "/nonexistent", 1);
    const std::unique_ptr<abi::exporter> e = p->create_exporter(abi::init_params{"nixl-entry", 8});
    ::unsetenv("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH");
    REQUIRE(e != nullptr);  // set-up failed, yet NIXL gets an exporter: it throws on null
    CHECK(e->export_event(ev(event_type::tx_bytes, 1)) == abi::status::success);
}

}  // namespace nixl_exporter_test
