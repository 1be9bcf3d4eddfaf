// What telemetry costs per event and per transfer, side by side with floors and baselines in
// the same run. scripts/bench runs this with repetitions and random interleaving and prints
// medians and ratios.

#include <benchmark/benchmark.h>
#include <x86intrin.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <stdlib.h>

#include "bench_util.hpp"
#include "floor.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/names.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace {

using xtel_bench::floor_loop;
using xtel_bench::floor_record;
using xtel_bench::flush_every;
using xtel_bench::line_floor_record;
using xtel_bench::pin_scope;
using xtel_bench::record_one_transfer;
using xtel_bench::recorder_drain;
using xtel_bench::split_clock;
using xtel_bench::spsc_floor_ring;

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

template <class Record>
void BM_floor_spsc_ring(benchmark::State& state) {
    spsc_floor_ring<Record> ring;  // one per benchmark thread
    std::uint64_t sum = 0;
    floor_loop(state, ring, [&](auto& r) {
        r.drain([&](const Record& record) {
            const floor_record& e = values_of(record);
            sum += e.timestamp_us + e.bytes + e.requests + e.post_us + e.xfer_us;
        });
    });
    benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_floor_spsc_ring<floor_record>)->Name("BM_floor/spsc_ring");
BENCHMARK(BM_floor_spsc_ring<floor_record>)->Name("BM_floor/spsc_ring")->Threads(2);
BENCHMARK(BM_floor_spsc_ring<line_floor_record>)->Name("BM_floor/spsc_ring_line");

/// The same floor ring and record, drained with the work xtel's buffer flush does
/// (recorder_drain). The record path is the floor's; only the drain weighs what xtel's does,
/// and so leaves the caches as xtel's leaves them for the records after it. Not a target: it
/// separates the record's own cost from what a flush of that weight costs the records that
/// follow it (docs/performance.md).
void BM_floor_spsc_ring_recorder(benchmark::State& state) {
    const xtel_bench::scratch_dir dir;
    spsc_floor_ring<> ring;
    recorder_drain drain(dir.path());
    floor_loop(state, ring, drain);
}
BENCHMARK(BM_floor_spsc_ring_recorder)->Name("BM_floor/spsc_ring_recorder");

// ---------------------------------------------------------------------------------------------
// Baselines, written here from their published designs.

/// (a) NIXL's agent before it batched a transfer's events (nixl #1844): each event is pushed
/// into a vector under a mutex, four locks per transfer; a flush thread swaps the vector out
/// under the same mutex.
class mutex_staging_v1 {
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

/// (a') NIXL's agent today, after nixl #1844: an event as NIXL lays it out (timestamp,
/// category, a 32-byte name copied with strncpy, value: 56 bytes), and a transfer's four events
/// appended to a vector under one lock, all four or none when the vector is at its cap. A flush
/// thread swaps the vector out under the same mutex.
struct nixl_shape_event {
    std::uint64_t timestamp_us;
    int category;
    char name[32];
    std::uint64_t value;

    nixl_shape_event(std::uint64_t ts, int cat, const char* event_name, std::uint64_t v) noexcept
        : timestamp_us(ts), category(cat), value(v) {
        std::strncpy(name, event_name, sizeof name - 1);
        name[sizeof name - 1] = '\0';
    }
};
static_assert(sizeof(nixl_shape_event) == 56);

class mutex_staging {
  public:
    explicit mutex_staging(std::size_t max_events) : max_events_(max_events) {
        events_.reserve(max_events_);
    }
    void add_transfer(std::uint64_t ts,
                      std::uint64_t bytes,
                      std::uint64_t requests,
                      std::uint64_t post_us,
                      std::uint64_t xfer_us) {
        constexpr int transfer = 1;
        constexpr int performance = 5;
        const std::lock_guard lock(mutex_);
        if (events_.size() + 4 > max_events_) {
            ++dropped_;
            return;
        }
        events_.emplace_back(ts, performance, "agent_xfer_time", xfer_us);
        events_.emplace_back(ts, transfer, "agent_tx_bytes", bytes);
        events_.emplace_back(ts, transfer, "agent_tx_requests_num", requests);
        events_.emplace_back(ts, performance, "agent_xfer_post_time", post_us);
    }
    std::size_t swap_out() {
        std::vector<nixl_shape_event> out;
        out.reserve(max_events_);
        {
            const std::lock_guard lock(mutex_);
            out.swap(events_);
        }
        return out.size();
    }
    std::uint64_t dropped() const noexcept { return dropped_; }

  private:
    std::mutex mutex_;
    std::vector<nixl_shape_event> events_;
    const std::size_t max_events_;
    std::uint64_t dropped_ = 0;
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
    mutex_staging_v1 staging;
    split_clock clock(state);
    std::uint64_t i = 0;
    clock.start();
    for (auto _ : state) {
        ++i;
        staging.add(xtel::category::custom, "agent_xfer_time", i, 1'700'000'000'000'000 + i);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            clock.flush([&] { staging.swap_out(); });
        }
    }
    clock.stop();
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
using xtel_bench::buffer_env;

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
    mutex_staging staging(4 * flush_every);
    split_clock clock(state);
    std::uint64_t i = 0;
    clock.start();
    for (auto _ : state) {
        ++i;
        staging.add_transfer(1'700'000'000'000'000 + i, 65536, 1, i & 7, i & 63);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            clock.flush([&] { staging.swap_out(); });
        }
    }
    clock.stop();
    state.counters["dropped"] = static_cast<double>(staging.dropped());
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_transfer_tax_mutex_staging)->Name("BM_transfer_tax/mutex_staging");

void BM_transfer_tax_mutex_staging_v1(benchmark::State& state) {
    const pin_scope pin(state.thread_index());
    mutex_staging_v1 staging;
    split_clock clock(state);
    std::uint64_t i = 0;
    clock.start();
    for (auto _ : state) {
        ++i;
        const std::uint64_t ts = 1'700'000'000'000'000 + i;
        staging.add(xtel::category::transfer, "agent_tx_bytes", 65536, ts);
        staging.add(xtel::category::transfer, "agent_tx_requests_num", 1, ts);
        staging.add(xtel::category::performance, "agent_xfer_time", i & 63, ts);
        staging.add(xtel::category::performance, "agent_xfer_post_time", i & 7, ts);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            clock.flush([&] { staging.swap_out(); });
        }
    }
    clock.stop();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_transfer_tax_mutex_staging_v1)->Name("BM_transfer_tax/mutex_staging_v1");

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

/// Issue 17's question: does the staging ring's size (16,384 x 64 B = 1 MiB per thread by
/// default, twice this machine's L2 per core) set the record's cost? The buffer pipeline with
/// the ring sized by the argument, flushed every flush_every transfers on the recording
/// thread, with no flusher thread (so that a ring half full at a flush wakes nothing).
void BM_ring_size_buffer(benchmark::State& state) {
    buffer_env env;
    auto t = std::make_unique<xtel::buffer_telemetry>(
        env.cfg, "bench",
        xtel::telemetry_options{.staging_capacity = static_cast<std::size_t>(state.range(0)),
                                .start_flusher = false});
    xtel_bench::transfer_tax_loop(state, t);
}
BENCHMARK(BM_ring_size_buffer)->Name("BM_ring_size/buffer")->Arg(4096)->Arg(8192)->Arg(16384);

// Single operations on the buffer pipeline.
template <class Op>
void run_buffer_op(benchmark::State& state, Op op) {
    buffer_env env;
    xtel::buffer_telemetry t(env.cfg, "bench");
    const pin_scope pin(state.thread_index());
    split_clock clock(state);
    std::uint64_t i = 0;
    clock.start();
    for (auto _ : state) {
        op(t, ++i);
        if ((i & (flush_every - 1)) == 0) [[unlikely]] {
            clock.flush([&] { t.flush(); });
        }
    }
    clock.stop();
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

using node_pipeline = xtel::pipeline_of<xtel::node_exporter>;
using prometheus_node_pipeline = xtel::pipeline_of<xtel::prometheus_exporter, xtel::node_exporter>;

/// The flusher's drain into the agent's metric model, as BM_drain/prometheus
/// (prometheus_bench.cpp) for the node exporter and for both: the same staged transfer records
/// folded (the processor, the latency histograms), published and, for node, encoded into the
/// node file. With prometheus and node both named, the model is folded once for both (before
/// issue 28: once for each). Items: the events the records stand for, 4 each, as there.
template <class Telemetry>
void BM_drain_model(benchmark::State& state, std::vector<std::string> exporters) {
    const xtel_bench::scratch_dir dir;
    ::setenv(xtel::env::prometheus_address, "127.0.0.1:0", 1);  // a free port
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = std::move(exporters);
    cfg.output_path = dir.path().string();  // node's directory when node is named
    constexpr std::size_t records = 4096;
    Telemetry t(cfg, "bench", {.staging_capacity = records, .start_flusher = false});
    std::uint64_t i = 0;
    for (auto _ : state) {
        state.PauseTiming();
        for (std::size_t r = 0; r < records; ++r) {
            record_one_transfer(t, ++i);
        }
        state.ResumeTiming();
        t.flush();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * records * 4));
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped);
}
void BM_drain_node(benchmark::State& state) {
    BM_drain_model<node_pipeline>(state, {"node"});
}
BENCHMARK(BM_drain_node)->Name("BM_drain/node");

void BM_drain_prometheus_node(benchmark::State& state) {
    BM_drain_model<prometheus_node_pipeline>(state, {"prometheus", "node"});
}
BENCHMARK(BM_drain_prometheus_node)->Name("BM_drain/prometheus_node");

}  // namespace

BENCHMARK_MAIN();
