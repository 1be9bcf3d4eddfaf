#pragma once
// Two sides of a comparison in neighbouring windows (paired_record_bench.cpp, peer_bench.cpp):
// each side's records timed in turn in one loop, a drain's worth a window, so that a slow spell
// of this shared host (seconds long) falls on both sides of a pair. Measured as separate cases,
// in one run of the harness, each side's median can land on either side of one, and their ratio
// then moves by more than the difference it is meant to show.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "bench_util.hpp"

namespace xtel_bench {

/// One window's wall time in nanoseconds: its records, and the drain or flush after them (0
/// for a side that has none).
struct window_ns {
    double records = 0;
    double after = 0;
};

/// Times records() and then after(), apart.
template <class Records, class After>
window_ns time_window(Records&& records, After&& after) {
    using steady = std::chrono::steady_clock;
    const auto since = [](steady::time_point t0) {
        return std::chrono::duration<double, std::nano>(steady::now() - t0).count();
    };
    window_ns w;
    auto t0 = steady::now();
    records();
    w.records = since(t0);
    t0 = steady::now();
    after();
    w.after = since(t0);
    return w;
}

/// Each iteration of `state` one pair of windows: first() and second() (each returns a
/// window_ns) in turn, which of them goes first alternating, first() in the first pair; then
/// pair(first's window, second's window). Pinned to one core, as the single-thread cases are.
template <class First, class Second, class Pair>
void alternate_windows(benchmark::State& state, First&& first, Second&& second, Pair&& pair) {
    const pin_scope pin(state.thread_index());
    bool first_first = true;
    for (auto _ : state) {
        window_ns a;
        window_ns b;
        if (first_first) {
            a = first();
            b = second();
        } else {
            b = second();
            a = first();
        }
        first_first = !first_first;
        pair(a, b);
    }
}

/// A pipeline's window: flush_every transfers recorded, as BM_transfer_tax records them. Not
/// inlined, and aligned, as the other side's window is: each loop's code, and so its place
/// against the fetch boundaries, is its own and not the case's around it (which moved either
/// side by 10% as code around it changed). Returns the last record's number: a counter kept in
/// a register, as the timed loops keep theirs; one passed by reference would be loaded and
/// stored every record.
template <class Telemetry>
[[gnu::noinline, gnu::aligned(64)]] std::uint64_t record_window(Telemetry& t, std::uint64_t j) {
    for (std::int64_t k = 0; k < flush_every; ++k) {
        record_one_transfer(t, ++j);
    }
    return j;
}

/// The median of `v` (sorted in place); 0 when empty.
inline double median_of(std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace xtel_bench
