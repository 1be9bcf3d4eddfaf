// What telemetry costs per event and per transfer, side by side with floors and baselines in
// the same run. scripts/bench runs this with repetitions and random interleaving and prints
// medians and ratios.

#include <benchmark/benchmark.h>
#include <x86intrin.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "xtel/pipelines.hpp"

namespace {

using xtel_bench::flush_every;
using xtel_bench::pin_scope;
using xtel_bench::record_one_transfer;

// ---------------------------------------------------------------------------------------------
// Floors: the cheapest things a record could possibly cost.

void BM_floor_empty_loop(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    for (auto _ : state) {
    }
}
BENCHMARK(BM_floor_empty_loop)->Name("BM_floor/empty_loop");

struct alignas(64) owned_line {
    std::atomic<std::uint64_t> value{0};
};

void BM_floor_relaxed_store(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    owned_line line;
    std::uint64_t i = 0;
    for (auto _ : state) {
        line.value.store(++i, std::memory_order_relaxed);
    }
    benchmark::DoNotOptimize(line.value.load());
}
BENCHMARK(BM_floor_relaxed_store)->Name("BM_floor/relaxed_store");

void BM_floor_relaxed_fetch_add(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    owned_line line;
    for (auto _ : state) {
        line.value.fetch_add(1, std::memory_order_relaxed);
    }
    benchmark::DoNotOptimize(line.value.load());
}
BENCHMARK(BM_floor_relaxed_fetch_add)->Name("BM_floor/relaxed_fetch_add");

void BM_floor_rdtsc(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    for (auto _ : state) {
        benchmark::DoNotOptimize(__rdtsc());
    }
}
BENCHMARK(BM_floor_rdtsc)->Name("BM_floor/rdtsc");

template <clockid_t Clock>
void BM_floor_clock(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    timespec ts;
    for (auto _ : state) {
        ::clock_gettime(Clock, &ts);
        benchmark::DoNotOptimize(ts);
    }
}
BENCHMARK(BM_floor_clock<CLOCK_MONOTONIC>)->Name("BM_floor/clock_monotonic");
BENCHMARK(BM_floor_clock<CLOCK_MONOTONIC_COARSE>)->Name("BM_floor/clock_monotonic_coarse");
BENCHMARK(BM_floor_clock<CLOCK_REALTIME>)->Name("BM_floor/clock_realtime");

// ---------------------------------------------------------------------------------------------
// Baselines, written here from their published designs.

/// (a) NIXL's agent today: each event is pushed into a vector under a mutex; a flush thread
/// swaps the vector out under the same mutex.
class mutex_staging {
  public:
    void add(xtel::category cat, const char* name, std::uint64_t value, std::uint64_t ts) {
        xtel::event e;
        e.timestamp_us = ts;
        e.cat = cat;
        e.name = name;
        e.value = value;
        const std::lock_guard lock(mutex_);
        events_.push_back(e);
    }
    std::size_t swap_out() {
        std::vector<xtel::event> out;
        {
            const std::lock_guard lock(mutex_);
            out.swap(events_);
        }
        events_.reserve(out.capacity());
        return out.size();
    }

  private:
    std::mutex mutex_;
    std::vector<xtel::event> events_;
};

/// (b) A virtual exporter call per event, into a ring the exporter owns.
class virtual_exporter {
  public:
    virtual ~virtual_exporter() = default;
    virtual void export_event(const xtel::event& e) noexcept = 0;
};

class ring_exporter final : public virtual_exporter {
  public:
    ring_exporter() : ring_(1 << 14) {}
    void export_event(const xtel::event& e) noexcept override {
        ring_[next_++ & (ring_.size() - 1)] = e;
    }

  private:
    std::vector<xtel::event> ring_;
    std::size_t next_ = 0;
};

[[gnu::noinline]] std::unique_ptr<virtual_exporter> make_virtual_exporter() {
    return std::make_unique<ring_exporter>();
}

void emit_virtual(virtual_exporter& ex,
                  xtel::category cat,
                  const char* name,
                  std::uint64_t value,
                  std::uint64_t ts) {
    xtel::event e;
    e.timestamp_us = ts;
    e.cat = cat;
    e.name = name;
    e.value = value;
    ex.export_event(e);
}

/// One event, for the single-event cases: (a) and (b) per event.
void BM_baseline_mutex_staging_event(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    mutex_staging staging;
    std::uint64_t i = 0;
    for (auto _ : state) {
        ++i;
        staging.add(xtel::category::custom, "agent_xfer_time", i, 1'700'000'000'000'000 + i);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            state.PauseTiming();
            staging.swap_out();
            state.ResumeTiming();
        }
    }
}
BENCHMARK(BM_baseline_mutex_staging_event)->Name("BM_baseline/mutex_staging_event");

void BM_baseline_virtual_exporter_event(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    const auto ex = make_virtual_exporter();
    std::uint64_t i = 0;
    for (auto _ : state) {
        ++i;
        emit_virtual(*ex, xtel::category::custom, "agent_xfer_time", i, 1'700'000'000'000'000 + i);
    }
}
BENCHMARK(BM_baseline_virtual_exporter_event)->Name("BM_baseline/virtual_exporter_event");

/// (c) A counter held as atomic<double>, added with a compare-and-swap loop.
void BM_baseline_atomic_double_add(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    static std::atomic<double> counter{0};
    for (auto _ : state) {
        double old = counter.load(std::memory_order_relaxed);
        while (!counter.compare_exchange_weak(old, old + 4096.0, std::memory_order_relaxed)) {
        }
    }
    benchmark::DoNotOptimize(counter.load());
}
BENCHMARK(BM_baseline_atomic_double_add)->Name("BM_baseline/atomic_double_add");
BENCHMARK(BM_baseline_atomic_double_add)->Name("BM_baseline/atomic_double_add")->Threads(2);

// ---------------------------------------------------------------------------------------------
// xtel

/// A flight recorder in a fresh temporary directory, for the buffer cases.
struct buffer_env {
    xtel_bench::scratch_dir dir;
    xtel::config cfg;
    buffer_env() {
        cfg.enabled = true;
        cfg.buffer_size = xtel::config::default_buffer_size;
        cfg.output_path = dir.path().string();
    }
};

void BM_transfer_tax_disabled(benchmark::State& state) {
    xtel::config cfg;
    xtel::disabled_telemetry t(cfg, "bench");
    const pin_scope pin(state.thread_index());
    std::uint64_t i = 0;
    for (auto _ : state) {
        record_one_transfer(t, ++i);
    }
}
BENCHMARK(BM_transfer_tax_disabled)->Name("BM_transfer_tax/disabled");

/// Shared by the enabled pipelines: one pipeline per run, flushed with the timer paused.
template <class Telemetry>
struct shared_pipeline {
    static inline std::unique_ptr<buffer_env> env;
    static inline std::unique_ptr<Telemetry> t;
};

template <class Telemetry, class Make>
void run_transfer_tax(benchmark::State& state, Make make) {
    using shared = shared_pipeline<Telemetry>;
    if (state.thread_index() == 0) {
        shared::env = std::make_unique<buffer_env>();
        shared::t = make(*shared::env);
    }
    xtel_bench::transfer_tax_loop(state, shared::t);
}

void BM_transfer_tax_buffer(benchmark::State& state) {
    run_transfer_tax<xtel::buffer_telemetry>(state, [](buffer_env& env) {
        return std::make_unique<xtel::buffer_telemetry>(env.cfg, "bench");
    });
    if (state.thread_index() == 0) {
        shared_pipeline<xtel::buffer_telemetry>::t.reset();
        shared_pipeline<xtel::buffer_telemetry>::env.reset();
    }
}
BENCHMARK(BM_transfer_tax_buffer)->Name("BM_transfer_tax/buffer");
BENCHMARK(BM_transfer_tax_buffer)->Name("BM_transfer_tax/buffer")->Threads(2);

void BM_transfer_tax_mutex_staging(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    mutex_staging staging;
    std::uint64_t i = 0;
    for (auto _ : state) {
        ++i;
        const std::uint64_t ts = 1'700'000'000'000'000 + i;
        staging.add(xtel::category::transfer, "agent_tx_bytes", 65536, ts);
        staging.add(xtel::category::transfer, "agent_tx_requests_num", 1, ts);
        staging.add(xtel::category::performance, "agent_xfer_time", i & 63, ts);
        staging.add(xtel::category::performance, "agent_xfer_post_time", i & 7, ts);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            state.PauseTiming();
            staging.swap_out();
            state.ResumeTiming();
        }
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_transfer_tax_mutex_staging)->Name("BM_transfer_tax/mutex_staging");

void BM_transfer_tax_virtual_exporter(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    const auto ex = make_virtual_exporter();
    std::uint64_t i = 0;
    for (auto _ : state) {
        ++i;
        const std::uint64_t ts = 1'700'000'000'000'000 + i;
        emit_virtual(*ex, xtel::category::transfer, "agent_tx_bytes", 65536, ts);
        emit_virtual(*ex, xtel::category::transfer, "agent_tx_requests_num", 1, ts);
        emit_virtual(*ex, xtel::category::performance, "agent_xfer_time", i & 63, ts);
        emit_virtual(*ex, xtel::category::performance, "agent_xfer_post_time", i & 7, ts);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_transfer_tax_virtual_exporter)->Name("BM_transfer_tax/virtual_exporter");

// Single operations on the buffer pipeline.
template <class Op>
void run_buffer_op(benchmark::State& state, Op op) {
    buffer_env env;
    xtel::buffer_telemetry t(env.cfg, "bench");
    const pin_scope pin(state.thread_index());
    std::uint64_t i = 0;
    for (auto _ : state) {
        op(t, ++i);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            state.PauseTiming();
            t.flush();
            state.ResumeTiming();
        }
    }
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped);
}

void BM_counter_add(benchmark::State& state) {
    run_buffer_op(state, [](auto& t, std::uint64_t i) {
        t.add(xtel::category::transfer, xtel::names::agent_tx_bytes, i);
    });
}
BENCHMARK(BM_counter_add)->Name("BM_counter_add/buffer");

void BM_gauge_set(benchmark::State& state) {
    run_buffer_op(state, [](auto& t, std::uint64_t i) {
        t.set(xtel::category::memory, xtel::names::agent_memory_registered, i);
    });
}
BENCHMARK(BM_gauge_set)->Name("BM_gauge_set/buffer");

void BM_record_event(benchmark::State& state) {
    run_buffer_op(state, [](auto& t, std::uint64_t i) {
        t.record_at(1'700'000'000'000'000 + i, xtel::category::custom, xtel::names::agent_xfer_time,
                    i);
    });
}
BENCHMARK(BM_record_event)->Name("BM_record_event/buffer");

void BM_record_event_now(benchmark::State& state) {
    run_buffer_op(state, [](auto& t, std::uint64_t i) {
        t.record(xtel::category::custom, xtel::names::agent_xfer_time, i);
    });
}
BENCHMARK(BM_record_event_now)->Name("BM_record_event/buffer_with_clock");

/// The flusher's drain: staged transfer records expanded and written to the flight recorder.
void BM_drain(benchmark::State& state) {
    buffer_env env;
    constexpr std::size_t records = 4096;
    xtel::buffer_telemetry t(env.cfg, "bench",
                             {.staging_capacity = records, .start_flusher = false});
    std::uint64_t i = 0;
    for (auto _ : state) {
        state.PauseTiming();
        for (std::size_t r = 0; r < records; ++r) {
            record_one_transfer(t, ++i);
        }
        state.ResumeTiming();
        t.flush();
    }
    state.SetItemsProcessed(state.iterations() * records * 4);  // four events per record
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped);
}
BENCHMARK(BM_drain)->Name("BM_drain/buffer");

}  // namespace

BENCHMARK_MAIN();
