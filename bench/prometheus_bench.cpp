// The Prometheus exporter: what a scrape costs to render, and what the prometheus and
// buffer,prometheus pipelines cost a transfer (summarize.py compares these with
// BM_transfer_tax/mutex_staging and checks the harness targets on them).

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "xtel/log.hpp"
#include "xtel/pipelines.hpp"

namespace {

using xtel_bench::flush_every;
using xtel_bench::pin_scope;

xtel::event make(xtel::category cat,
                 std::string_view name,
                 std::uint64_t value,
                 xtel::value_kind kind) {
    xtel::event e;
    e.cat = cat;
    e.name = name;
    e.value = value;
    e.kind = kind;
    return e;
}

std::size_t sample_lines(const std::string& text) {
    std::size_t n = 0;
    std::size_t at = 0;
    while (at < text.size()) {
        n += text[at] != '#';
        const auto nl = text.find('\n', at);
        at = nl == std::string::npos ? text.size() : nl + 1;
    }
    return n;
}

/// Renders an agent whose scrape has state.range(0) series (sample lines): the built-in
/// families, with transfers in their histograms, and as many backend counters as it takes.
void BM_prometheus_render(benchmark::State& state) {
    xtel::set_log_level(xtel::log_level::warning);
    const auto wanted = static_cast<std::size_t>(state.range(0));
    xtel::config cfg;
    xtel::prometheus_settings s;
    s.address = {"127.0.0.1", 0};
    xtel::prometheus_exporter e({cfg, "bench_agent"}, s);
    const xtel::label_table labels;
    std::vector<xtel::transfer_record> transfers(1000);
    for (std::uint64_t i = 0; i < transfers.size(); ++i) {
        transfers[i].bytes = 65536;
        transfers[i].requests = 1;
        transfers[i].xfer_us = i * 37 % 100000;
    }
    e.export_transfers(transfers, labels);
    e.on_flush_end();
    std::vector<xtel::event> batch;
    const std::size_t builtin = sample_lines(e.scrape());
    batch.clear();
    for (std::size_t i = builtin; i < wanted; ++i) {
        batch.push_back(make(xtel::category::backend, fmt::format("backend_op_{:06}", i), i,
                             xtel::value_kind::counter));
    }
    e.export_batch(batch);
    e.on_flush_end();

    const pin_scope pin(state.thread_index());
    std::size_t bytes = 0;
    for (auto _ : state) {
        const std::string text = e.scrape();
        bytes = text.size();
        benchmark::DoNotOptimize(text.data());
    }
    state.counters["series"] = static_cast<double>(sample_lines(e.scrape()));
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}
BENCHMARK(BM_prometheus_render)->Arg(1000)->Arg(10000);

/// The pipelines under test, with their endpoint on a free loopback port and, for
/// buffer,prometheus, the flight recorder in a scratch directory.
struct prometheus_env {
    xtel_bench::scratch_dir dir;
    xtel::config cfg;
    explicit prometheus_env(bool with_buffer) {
        xtel::set_log_level(xtel::log_level::warning);
        ::setenv(xtel::env::prometheus_address, "127.0.0.1:0", 1);
        cfg.enabled = true;
        cfg.exporters = with_buffer ? std::vector<std::string>{"buffer", "prometheus"}
                                    : std::vector<std::string>{"prometheus"};
        cfg.output_path = with_buffer ? dir.path().string() : std::string();
    }
};

template <class Telemetry>
struct shared_pipeline {
    static inline std::unique_ptr<prometheus_env> env;
    static inline std::unique_ptr<Telemetry> t;
};

/// What the agent records after a transfer: one transfer record with the timestamps it
/// already took, on a pipeline with its flusher running; flushed every flush_every transfers
/// with the timer paused, as the harness does for BM_transfer_tax/buffer.
template <class Telemetry>
void run_transfer_tax(benchmark::State& state, bool with_buffer) {
    using shared = shared_pipeline<Telemetry>;
    if (state.thread_index() == 0) {
        shared::env = std::make_unique<prometheus_env>(with_buffer);
        shared::t = std::make_unique<Telemetry>(shared::env->cfg, "bench",
                                                xtel::telemetry_options{.start_flusher = true});
    }
    xtel_bench::transfer_tax_loop(state, shared::t);
    if (state.thread_index() == 0) {
        shared::t.reset();
        shared::env.reset();
    }
}

void BM_transfer_tax_prometheus(benchmark::State& state) {
    run_transfer_tax<xtel::prometheus_telemetry>(state, false);
}
BENCHMARK(BM_transfer_tax_prometheus)->Name("BM_transfer_tax/prometheus");
BENCHMARK(BM_transfer_tax_prometheus)->Name("BM_transfer_tax/prometheus")->Threads(2);

void BM_transfer_tax_buffer_prometheus(benchmark::State& state) {
    run_transfer_tax<xtel::buffer_prometheus_telemetry>(state, true);
}
BENCHMARK(BM_transfer_tax_buffer_prometheus)->Name("BM_transfer_tax/buffer_prometheus");
BENCHMARK(BM_transfer_tax_buffer_prometheus)->Name("BM_transfer_tax/buffer_prometheus")->Threads(2);

/// The flusher's side: 4096 staged transfers folded into the metric state (items: the events
/// they stand for, 4 each, as before the exporter took them as records).
void BM_prometheus_drain(benchmark::State& state) {
    prometheus_env env(false);
    constexpr std::size_t records = 4096;
    xtel::prometheus_telemetry t(env.cfg, "bench",
                                 {.staging_capacity = records, .start_flusher = false});
    std::uint64_t i = 0;
    for (auto _ : state) {
        state.PauseTiming();
        for (std::size_t r = 0; r < records; ++r) {
            ++i;
            t.record_transfer(xtel::direction::tx, 1'700'000'000'000'000 + i, 65536, 1, i & 7,
                              i & 63);
        }
        state.ResumeTiming();
        t.flush();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * records * 4));
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped);
}
BENCHMARK(BM_prometheus_drain)->Name("BM_drain/prometheus");

}  // namespace
