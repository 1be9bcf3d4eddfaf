#pragma once
// Shared pieces of the benchmark harness.

#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "xtel/core/telemetry.hpp"

namespace xtel_bench {

/// Pins the calling thread to one core (thread i to core i mod cores) for the life of the
/// scope, where the machine allows; restores the previous mask after. Pinning keeps a
/// single-thread case from migrating between cores mid-measurement.
class pin_scope {
  public:
    explicit pin_scope(int thread_index) {
        pinned_ = ::sched_getaffinity(0, sizeof old_, &old_) == 0;
        if (!pinned_) {
            return;
        }
        const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(static_cast<int>(thread_index % (cores > 0 ? cores : 1)), &one);
        pinned_ = ::sched_setaffinity(0, sizeof one, &one) == 0;
    }
    ~pin_scope() {
        if (pinned_) {
            ::sched_setaffinity(0, sizeof old_, &old_);
        }
    }
    pin_scope(const pin_scope&) = delete;
    pin_scope& operator=(const pin_scope&) = delete;

  private:
    cpu_set_t old_{};
    bool pinned_ = false;
};

/// A fresh directory for flight recorder files, on /dev/shm where it exists (as deployed),
/// removed afterwards.
class scratch_dir {
  public:
    scratch_dir() {
        const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                               ? std::filesystem::path("/dev/shm")
                                               : std::filesystem::temp_directory_path();
        std::string tmpl = (base / "xtel-bench-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path_ = tmpl;
    }
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
};

/// An enabled configuration whose buffer exporter writes to a scratch directory: what the
/// transfer-tax cases of the buffer pipeline run on.
struct buffer_env {
    scratch_dir dir;
    xtel::config cfg;
    buffer_env() {
        cfg.enabled = true;
        cfg.buffer_size = xtel::config::default_buffer_size;
        cfg.output_path = dir.path().string();
    }
};

/// Reports sorted ratios of a case that alternates windows: their median and quartiles as
/// counters <prefix>_ratio_median, _q1, _q3 and <prefix>_pairs, and every ratio appended to the
/// file XTEL_BENCH_WINDOWS_OUT names, when set, as lines "<case>\t<prefix>\t<ratio>":
/// bench/summarize.py pools a case's windows over its repetitions for the targets.
inline void report_window_ratios(benchmark::State& state,
                                 const std::string& case_name,
                                 const std::string& prefix,
                                 const std::vector<double>& sorted) {
    if (sorted.empty()) {
        return;
    }
    if (const char* path = std::getenv("XTEL_BENCH_WINDOWS_OUT"); path && *path) {
        if (std::ofstream out(path, std::ios::app); out) {
            out.precision(17);
            for (const double ratio : sorted) {
                out << case_name << '\t' << prefix << '\t' << ratio << '\n';
            }
        }
    }
    state.counters[prefix + "_pairs"] = static_cast<double>(sorted.size());
    state.counters[prefix + "_ratio_median"] = sorted[sorted.size() / 2];
    state.counters[prefix + "_ratio_q1"] = sorted[sorted.size() / 4];
    state.counters[prefix + "_ratio_q3"] = sorted[(3 * sorted.size()) / 4];
}

/// Transfers between two manual flushes in the transfer-tax cases: a benchmark loop records
/// far faster than any real transfer completes, so without these the staging ring would fill
/// and the cases would measure the (cheaper) drop path.
inline constexpr std::int64_t flush_every = 4096;

/// CPU time of the calling thread, in nanoseconds: the clock Google Benchmark reads for a
/// case's CPU time, and for PauseTiming/ResumeTiming.
inline std::uint64_t thread_cpu_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

/// Splits a case's CPU time into the record and the flush (drain) that follows every
/// flush_every records. The flush stays inside the timed loop, so the benchmark's own clock,
/// which decides how long a case runs, counts it: pausing the timer instead made the flush
/// (about ten times the records it drains) untimed, and the harness ran for ten times its
/// min_time. The flush is timed on its own with the thread's CPU clock, two reads per
/// flush_every records; the case reports per transfer, averaged over its threads:
/// - record_ns: the loop's CPU time less its flushes', the figure the targets judge (what
///   PauseTiming measured, less the cost of pausing);
/// - flush_ns: the flushes' share.
/// The case's own cpu_time is their sum.
class split_clock {
  public:
    explicit split_clock(benchmark::State& state) : state_(state) {}
    split_clock(const split_clock&) = delete;
    split_clock& operator=(const split_clock&) = delete;

    /// Call just before the timed loop.
    void start() noexcept { loop_start_ = thread_cpu_ns(); }

    /// Runs flush() and counts its CPU time as the flush's.
    template <class Flush>
    void flush(Flush&& flush) {
        const std::uint64_t t0 = thread_cpu_ns();
        flush();
        flush_ns_ += thread_cpu_ns() - t0;
    }

    /// Call just after the timed loop: sets record_ns and flush_ns.
    void stop() {
        const std::uint64_t loop = thread_cpu_ns() - loop_start_;
        const double n = static_cast<double>(state_.iterations());
        if (n == 0) {
            return;
        }
        const double record = loop > flush_ns_ ? static_cast<double>(loop - flush_ns_) : 0.0;
        state_.counters["record_ns"] =
            benchmark::Counter(record / n, benchmark::Counter::kAvgThreads);
        state_.counters["flush_ns"] =
            benchmark::Counter(static_cast<double>(flush_ns_) / n, benchmark::Counter::kAvgThreads);
    }

  private:
    benchmark::State& state_;
    std::uint64_t loop_start_ = 0;
    std::uint64_t flush_ns_ = 0;
};

/// What an agent records after a transfer: one transfer record with the timestamps it already
/// took.
template <class Telemetry>
[[gnu::always_inline]] inline void record_one_transfer(Telemetry& t, std::uint64_t i) {
    t.record_transfer(xtel::direction::tx, 1'700'000'000'000'000 + i, 65536, 1, i & 7, i & 63);
}

/// record_one_transfer with a request id (a W3C traceparent, 55 bytes): the record and its id
/// in the slot after it, as a tagged and timed transfer stages them.
template <class Telemetry>
[[gnu::always_inline]] inline void record_one_tagged_transfer(Telemetry& t, std::uint64_t i) {
    static constexpr std::string_view id =
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    t.record_transfer(xtel::direction::tx, 1'700'000'000'000'000 + i, 65536, 1, i & 7, i & 63,
                      xtel::transfer_attributes{}, id);
}

/// The timed loop of every BM_transfer_tax case on an enabled pipeline: `shared` is the
/// pipeline thread 0 set up before the loops start (Google Benchmark starts every thread's loop
/// together, after that). Flushes every flush_every transfers, timed apart (split_clock);
/// thread 0 reports what was dropped. `Tagged`: each transfer carries a request id (a template
/// argument, so that the untagged loop has no test of it to pay that the floors do not).
template <bool Tagged = false, class Telemetry>
void transfer_tax_loop(benchmark::State& state, const std::unique_ptr<Telemetry>& shared) {
    Telemetry* t = nullptr;
    split_clock clock(state);
    {
        const pin_scope pin(state.thread_index());
        std::uint64_t i = 0;
        clock.start();
        for (auto _ : state) {
            if (t == nullptr) [[unlikely]] {
                t = shared.get();
            }
            if constexpr (Tagged) {
                record_one_tagged_transfer(*t, ++i);
            } else {
                record_one_transfer(*t, ++i);
            }
            if ((i & (flush_every - 1)) == 0) [[unlikely]] {
                clock.flush([t] { t->flush(); });
            }
        }
        clock.stop();
    }
    if (state.thread_index() == 0) {
        state.counters["dropped"] = static_cast<double>(shared->stats().records_dropped);
    }
    state.SetItemsProcessed(state.iterations());
}

}  // namespace xtel_bench
