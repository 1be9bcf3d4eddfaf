// The record against its floor in neighbouring windows (issue 32's item 5, docs/performance.md):
// BM_transfer_tax/buffer's record and BM_floor/spsc_ring_recorder's, taken in turn in one loop
// (paired_windows.hpp), each window's time over its partner's. Measured apart, the floor itself
// moved from 2.2 to 3.5 ns between slow spells of this shared host; here both sides of a pair
// run within some 30 microseconds of each other. The UCX cases of agent_bench.cpp are measured
// the same way, against off.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench_util.hpp"
#include "floor.hpp"
#include "paired_windows.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace {

using xtel_bench::window_ns;

/// The floor's window: flush_every floor records pushed, as floor_loop pushes them. Not
/// inlined, and aligned, as the record's window is (xtel_bench::record_window). Returns the last
/// record's number.
[[gnu::noinline, gnu::aligned(64)]] std::uint64_t floor_window(xtel_bench::spsc_floor_ring<>& ring,
                                                               std::uint64_t i) {
    for (std::int64_t k = 0; k < xtel_bench::flush_every; ++k) {
        ++i;
        // As floor_loop (floor.hpp) builds it: in place, field by field.
        const xtel_bench::floor_record rec{.timestamp_us = 1'700'000'000'000'000 + i,
                                           .bytes = 65536,
                                           .requests = 1,
                                           .post_us = static_cast<std::uint32_t>(i & 7),
                                           .xfer_us = static_cast<std::uint32_t>(i & 63),
                                           .direction = 0};
        ring.push(rec);
    }
    return i;
}

/// One iteration is a pair of windows: flush_every floor records pushed into the floor's ring
/// (as BM_floor/spsc_ring_recorder pushes them) and flush_every transfers recorded into the
/// buffer pipeline (as BM_transfer_tax/buffer records them), in turn (alternate_windows); each
/// window is followed by its drain (the floor's recorder_drain, the pipeline's flush), timed
/// apart. Reports, per pair, the record's time over the floor's ("record") and the record and
/// flush over the floor's record and drain ("whole"); and the medians per transfer (record_ns,
/// floor_record_ns) for reading beside the unpaired cases.
void BM_record_paired_buffer(benchmark::State& state) {
    const xtel_bench::scratch_dir dir;
    xtel_bench::spsc_floor_ring<> ring;
    xtel_bench::recorder_drain drain(dir.path());
    const xtel_bench::buffer_env env;
    xtel::buffer_telemetry t(env.cfg, "bench");
    std::vector<double> record;
    std::vector<double> whole;
    std::vector<double> record_ns;
    std::vector<double> floor_ns;
    std::uint64_t i = 0;
    std::uint64_t j = 0;
    xtel_bench::alternate_windows(
        state,
        [&] {
            return xtel_bench::time_window([&] { i = floor_window(ring, i); },
                                           [&] { drain(ring); });
        },
        [&] {
            return xtel_bench::time_window([&] { j = xtel_bench::record_window(t, j); },
                                           [&] { t.flush(); });
        },
        [&](const window_ns& floor, const window_ns& rec) {
            if (floor.records > 0) {
                record.push_back(rec.records / floor.records);
                whole.push_back((rec.records + rec.after) / (floor.records + floor.after));
                record_ns.push_back(rec.records / xtel_bench::flush_every);
                floor_ns.push_back(floor.records / xtel_bench::flush_every);
            }
        });
    state.counters["record_ns"] = xtel_bench::median_of(record_ns);
    state.counters["floor_record_ns"] = xtel_bench::median_of(floor_ns);
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped + ring.dropped());
    std::sort(record.begin(), record.end());
    std::sort(whole.begin(), whole.end());
    xtel_bench::report_window_ratios(state, "BM_record_paired/buffer", "record", record);
    xtel_bench::report_window_ratios(state, "BM_record_paired/buffer", "whole", whole);
    state.SetItemsProcessed(2 * xtel_bench::flush_every * state.iterations());
}
BENCHMARK(BM_record_paired_buffer)->Name("BM_record_paired/buffer");

}  // namespace
