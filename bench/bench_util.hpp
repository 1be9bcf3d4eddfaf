#pragma once
// Shared pieces of the benchmark harness.

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "xtel/telemetry.hpp"

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

/// Transfers between two manual flushes in the transfer-tax cases: a benchmark loop records
/// far faster than any real transfer completes, so without these the staging ring would fill
/// and the cases would measure the (cheaper) drop path. Flushes run with the timer paused.
inline constexpr std::int64_t flush_every = 4096;

/// What an agent records after a transfer: one transfer record with the timestamps it already
/// took.
template <class Telemetry>
[[gnu::always_inline]] inline void record_one_transfer(Telemetry& t, std::uint64_t i) {
    t.record_transfer(xtel::direction::tx, 1'700'000'000'000'000 + i, 65536, 1, i & 7, i & 63);
}

/// The timed loop of every BM_transfer_tax case on an enabled pipeline: `shared` is the
/// pipeline thread 0 set up before the loops start (Google Benchmark starts every thread's loop
/// together, after that). Flushes every flush_every transfers with the timer paused; thread 0
/// reports what was dropped.
template <class Telemetry>
void transfer_tax_loop(benchmark::State& state, const std::unique_ptr<Telemetry>& shared) {
    Telemetry* t = nullptr;
    {
        const pin_scope pin(state.thread_index());
        std::uint64_t i = 0;
        for (auto _ : state) {
            if (t == nullptr) [[unlikely]] {
                t = shared.get();
            }
            record_one_transfer(*t, ++i);
            if ((i & (flush_every - 1)) == 0) [[unlikely]] {
                state.PauseTiming();
                t->flush();
                state.ResumeTiming();
            }
        }
    }
    if (state.thread_index() == 0) {
        state.counters["dropped"] = static_cast<double>(shared->stats().records_dropped);
    }
    state.SetItemsProcessed(state.iterations());
}

}  // namespace xtel_bench
