// The record against its floor in neighbouring windows (issue 32's item 5, docs/performance.md):
// BM_transfer_tax/buffer's record and BM_floor/spsc_ring_recorder's, taken in turn in one loop,
// a drain's worth of records a window, each window's time over its partner's. Measured apart,
// in one run of the harness, the two cases' medians can fall on either side of a slow spell of
// this shared host (seconds long, and the floor itself moved from 2.2 to 3.5 ns): their ratio
// then moves by more than the difference it is meant to show. Here both sides of a pair run
// within some 30 microseconds of each other. The UCX cases of agent_bench.cpp are measured the
// same way, against off.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "bench_util.hpp"
#include "floor.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace {

using steady = std::chrono::steady_clock;

double ns_since(steady::time_point t0) {
    return std::chrono::duration<double, std::nano>(steady::now() - t0).count();
}

/// The floor's window: flush_every floor records pushed, as floor_loop pushes them. Not
/// inlined, and aligned, as the record's window is: each loop's code, and so its place against
/// the fetch boundaries, is its own and not the case's around it (which moved either side by
/// 10% as code around it changed). Returns the last record's number: a counter kept in a
/// register, as the timed loops keep theirs; one passed by reference would be loaded and stored
/// every record.
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

/// The record's window: flush_every transfers recorded, as BM_transfer_tax/buffer records them.
[[gnu::noinline, gnu::aligned(64)]] std::uint64_t record_window(xtel::buffer_telemetry& t,
                                                                std::uint64_t j) {
    for (std::int64_t k = 0; k < xtel_bench::flush_every; ++k) {
        xtel_bench::record_one_transfer(t, ++j);
    }
    return j;
}

/// One iteration is a pair of windows: flush_every transfers recorded into the buffer pipeline
/// (as BM_transfer_tax/buffer records them) and flush_every floor records pushed into the
/// floor's ring (as BM_floor/spsc_ring_recorder pushes them), in turn, which goes first
/// alternating; each window is followed by its drain (the pipeline's flush, the floor's
/// recorder_drain), timed apart. Reports, per pair, the record's time over the floor's
/// ("record") and the record and flush over the floor's record and drain ("whole"); and the
/// medians per transfer (record_ns, floor_record_ns) for reading beside the unpaired cases.
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
    {
        const xtel_bench::pin_scope pin(state.thread_index());
        std::uint64_t i = 0;
        std::uint64_t j = 0;
        bool floor_first = true;
        for (auto _ : state) {
            double floor_push = 0;
            double floor_drain = 0;
            double rec = 0;
            double flush = 0;
            const auto run_floor = [&] {
                auto t0 = steady::now();
                i = floor_window(ring, i);
                floor_push = ns_since(t0);
                t0 = steady::now();
                drain(ring);
                floor_drain = ns_since(t0);
            };
            const auto run_record = [&] {
                auto t0 = steady::now();
                j = record_window(t, j);
                rec = ns_since(t0);
                t0 = steady::now();
                t.flush();
                flush = ns_since(t0);
            };
            if (floor_first) {
                run_floor();
                run_record();
            } else {
                run_record();
                run_floor();
            }
            floor_first = !floor_first;
            if (floor_push > 0) {
                record.push_back(rec / floor_push);
                whole.push_back((rec + flush) / (floor_push + floor_drain));
                record_ns.push_back(rec / xtel_bench::flush_every);
                floor_ns.push_back(floor_push / xtel_bench::flush_every);
            }
        }
    }
    const auto median = [](std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
    };
    state.counters["record_ns"] = median(record_ns);
    state.counters["floor_record_ns"] = median(floor_ns);
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped + ring.dropped());
    std::sort(record.begin(), record.end());
    std::sort(whole.begin(), whole.end());
    xtel_bench::report_window_ratios(state, "BM_record_paired/buffer", "record", record);
    xtel_bench::report_window_ratios(state, "BM_record_paired/buffer", "whole", whole);
    state.SetItemsProcessed(2 * xtel_bench::flush_every * state.iterations());
}
BENCHMARK(BM_record_paired_buffer)->Name("BM_record_paired/buffer");

}  // namespace
