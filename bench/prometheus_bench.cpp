// The Prometheus exporter: what a scrape costs to render (in each format, plain and gzip), and
// what the prometheus and buffer,prometheus pipelines cost a transfer (summarize.py compares
// these with BM_transfer_tax/mutex_staging and checks the harness targets on them).

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "xtel/core/log.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/http/gzip.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot.hpp"

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
    const auto m = std::make_shared<xtel::metrics::agent_metrics>(
        "bench_agent", xtel::metrics::agent_metrics_settings{});
    xtel::prometheus_exporter e({{cfg, "bench_agent"}, m}, s);
    const xtel::label_table labels;
    std::vector<xtel::transfer_record> transfers(1000);
    for (std::uint64_t i = 0; i < transfers.size(); ++i) {
        transfers[i].bytes = 65536;
        transfers[i].requests = 1;
        transfers[i].xfer_us = i * 37 % 100000;
    }
    m->apply_transfers(transfers, labels);
    m->publish();
    std::vector<xtel::event> batch;
    const std::size_t builtin = sample_lines(e.scrape());
    batch.clear();
    for (std::size_t i = builtin; i < wanted; ++i) {
        batch.push_back(make(xtel::category::backend, fmt::format("backend_op_{:06}", i), i,
                             xtel::value_kind::counter));
    }
    m->apply(batch);
    m->publish();

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

/// Two agents' snapshots of 5,000 series each, 10,000 in all: 2,000 counters and 2,000 gauges
/// over two families each, and 1,000 histograms of 10 buckets (microseconds shown as seconds)
/// whose buckets mostly hold an exemplar, as a KV-cache agent with many peers would show.
std::vector<std::shared_ptr<const xtel::metrics::snapshot>> scrape_snapshots() {
    using xtel::metrics::metric_type;
    std::vector<std::shared_ptr<const xtel::metrics::snapshot>> out;
    for (const char* agent : {"prefill_0", "decode_0"}) {
        xtel::metrics::metric_store store({.max_series = 5000});
        const std::vector<std::string> labels = {"peer", "op"};
        const auto bytes = store.add_family(
            {"xtel_kv_bytes_total", "Bytes moved.", metric_type::counter, labels, 0, {}, "bytes"});
        const auto requests = store.add_family(
            {"xtel_kv_requests_total", "Requests completed.", metric_type::counter, labels});
        const auto inflight = store.add_family(
            {"xtel_kv_inflight", "Requests in flight.", metric_type::gauge, labels});
        const auto queued = store.add_family(
            {"xtel_kv_queued_bytes", "Bytes queued.", metric_type::gauge, labels, 0, {}, "bytes"});
        const auto latency =
            store.add_family({"xtel_kv_latency_seconds",
                              "Seconds from post to completion.",
                              metric_type::histogram,
                              labels,
                              6,
                              {50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000},
                              "seconds"});
        std::uint64_t n = 0;
        for (int peer = 0; peer < 500; ++peer) {
            const std::string p = fmt::format("decode-{:03}", peer);
            for (const char* op : {"read", "write"}) {
                for (const auto f : {bytes, requests, inflight, queued}) {
                    store.add(f, {p, op}, ++n * 4096);
                }
                const auto s = store.series_of(latency, {p, op});
                for (std::uint64_t i = 0; i < 40; ++i) {
                    const std::uint64_t us = (++n * 7919) % 80000;
                    store.observe(s, us,
                                  {"request_id", fmt::format("kv-{}", n), 0,
                                   1'732'460'000'000'000 + n * 1000});
                }
            }
        }
        out.push_back(std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::take_snapshot(
            store, {{"agent_name", agent}, {"hostname", "bench-host"}})));
    }
    return out;
}

/// One /metrics body of the 10,000 series: range(0) 0 text, 1 OpenMetrics; range(1) the gzip
/// level, 0 for none. What the endpoint does once per representation per flush round.
void BM_scrape_body(benchmark::State& state) {
    static const auto snapshots = scrape_snapshots();
    const auto format = state.range(0) == 0 ? xtel::metrics::exposition::text
                                            : xtel::metrics::exposition::openmetrics;
    const int level = static_cast<int>(state.range(1));
    const pin_scope pin(state.thread_index());
    std::size_t plain = 0;
    std::size_t sent = 0;
    for (auto _ : state) {
        std::string body;
        body.reserve(plain);
        xtel::metrics::render(snapshots, body, format);
        plain = body.size();
        if (level > 0) {
            const std::string zipped = xtel::http::gzip(body, level);
            sent = zipped.size();
            benchmark::DoNotOptimize(zipped.data());
        } else {
            sent = plain;
            benchmark::DoNotOptimize(body.data());
        }
    }
    state.counters["plain_bytes"] = static_cast<double>(plain);
    state.counters["sent_bytes"] = static_cast<double>(sent);
    state.SetBytesProcessed(static_cast<std::int64_t>(plain) * state.iterations());
}
BENCHMARK(BM_scrape_body)
    ->ArgNames({"openmetrics", "gzip"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({0, 6})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({1, 6})
    ->Unit(benchmark::kMillisecond);

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
