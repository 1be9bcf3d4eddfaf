// A real peer, in the same run as xtel's record and the floors (issue 46, item 8):
// prometheus-cpp (Debian's prometheus-cpp-dev), the library NIXL's Prometheus exporter is built
// on, recording what an agent records per transfer. The baselines of telemetry_bench.cpp are
// written from published designs; this one is the library itself, as packaged.
// - BM_transfer_tax/prometheus_cpp (and /threads:2): the peer measured as the BM_transfer_tax
//   cases are, CPU time per transfer on the recording thread (it has no flush: all its work is
//   there).
// - BM_peer_paired/<pipeline>: xtel's prometheus and node pipelines against the peer in
//   neighbouring windows (paired_windows.hpp), the record and the record with its share of the
//   flush each over the peer's record; bench/summarize.py checks the target on these.

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "paired_windows.hpp"
#include "prometheus_cpp_peer.hpp"
#include "xtel/core/log.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace {

using xtel_bench::prometheus_cpp_agent;
using xtel_bench::window_ns;

/// One agent for every thread of a case, as an agent's series are one set whichever thread
/// completes a transfer: /threads:2 records into the same counters and histograms from two
/// threads, their atomics' and the histograms' locks' lines shared between the cores.
std::unique_ptr<prometheus_cpp_agent> shared_peer;

/// The peer measured as the BM_transfer_tax cases are (transfer_tax_loop): thread 0 makes the
/// agent before every thread's loop starts; record_ns is CPU time per transfer, flush_ns 0.
/// Reports requests_per_transfer, the requests counted over the transfers recorded (1: none
/// lost).
void BM_transfer_tax_prometheus_cpp(benchmark::State& state) {
    if (state.thread_index() == 0) {
        shared_peer = std::make_unique<prometheus_cpp_agent>();
    }
    prometheus_cpp_agent* peer = nullptr;
    xtel_bench::split_clock clock(state);
    {
        const xtel_bench::pin_scope pin(state.thread_index());
        std::uint64_t i = 0;
        clock.start();
        for (auto _ : state) {
            if (peer == nullptr) [[unlikely]] {
                peer = shared_peer.get();
            }
            peer->record(++i);
        }
        clock.stop();
    }
    state.SetItemsProcessed(state.iterations());
    if (state.thread_index() == 0) {
        // Every thread's loop has ended here: Google Benchmark waits for all at a loop's end.
        state.counters["requests_per_transfer"] = benchmark::Counter(
            shared_peer->requests() / static_cast<double>(state.iterations() * state.threads()));
        shared_peer.reset();
    }
}
BENCHMARK(BM_transfer_tax_prometheus_cpp)->Name("BM_transfer_tax/prometheus_cpp");
BENCHMARK(BM_transfer_tax_prometheus_cpp)->Name("BM_transfer_tax/prometheus_cpp")->Threads(2);

/// The peer's window: flush_every transfers recorded. Not inlined, and aligned, as the
/// pipeline's window is (xtel_bench::record_window). Returns the last record's number.
[[gnu::noinline, gnu::aligned(64)]] std::uint64_t peer_window(prometheus_cpp_agent& peer,
                                                              std::uint64_t i) {
    for (std::int64_t k = 0; k < xtel_bench::flush_every; ++k) {
        peer.record(++i);
    }
    return i;
}

/// An enabled pipeline with the exporters named: the endpoint (prometheus) on a free loopback
/// port, the node file (node) in a scratch directory.
struct pipeline_env {
    xtel_bench::scratch_dir dir;
    xtel::config cfg;
    explicit pipeline_env(std::vector<std::string> exporters) {
        xtel::set_log_level(xtel::log_level::warning);
        ::setenv(xtel::env::prometheus_address, "127.0.0.1:0", 1);
        cfg.enabled = true;
        cfg.exporters = std::move(exporters);
        cfg.output_path = dir.path().string();
    }
};

/// One iteration is a pair of windows: flush_every transfers recorded into the pipeline (as
/// BM_transfer_tax/<pipeline> records them, its flusher running), then its flush, timed apart;
/// and flush_every transfers recorded by the peer, in turn (alternate_windows). Reports, per
/// pair, the record's time over the peer's ("peer") and the record and flush over the peer's
/// ("peer_whole"), and the medians per transfer: record_ns and flush_ns (the pipeline's),
/// peer_ns.
template <class Telemetry>
void BM_peer_paired(benchmark::State& state, const char* exporter) {
    const pipeline_env env({exporter});
    Telemetry t(env.cfg, "bench");
    prometheus_cpp_agent peer;
    std::vector<double> record;
    std::vector<double> whole;
    std::vector<double> record_ns;
    std::vector<double> flush_ns;
    std::vector<double> peer_ns;
    std::uint64_t i = 0;
    std::uint64_t j = 0;
    xtel_bench::alternate_windows(
        state,
        [&] {
            return xtel_bench::time_window([&] { j = xtel_bench::record_window(t, j); },
                                           [&] { t.flush(); });
        },
        [&] { return xtel_bench::time_window([&] { i = peer_window(peer, i); }, [] {}); },
        [&](const window_ns& rec, const window_ns& theirs) {
            if (theirs.records > 0) {
                record.push_back(rec.records / theirs.records);
                whole.push_back((rec.records + rec.after) / theirs.records);
                record_ns.push_back(rec.records / xtel_bench::flush_every);
                flush_ns.push_back(rec.after / xtel_bench::flush_every);
                peer_ns.push_back(theirs.records / xtel_bench::flush_every);
            }
        });
    state.counters["record_ns"] = xtel_bench::median_of(record_ns);
    state.counters["flush_ns"] = xtel_bench::median_of(flush_ns);
    state.counters["peer_ns"] = xtel_bench::median_of(peer_ns);
    state.counters["dropped"] = static_cast<double>(t.stats().records_dropped);
    std::sort(record.begin(), record.end());
    std::sort(whole.begin(), whole.end());
    const std::string name = std::string("BM_peer_paired/") + exporter;
    xtel_bench::report_window_ratios(state, name, "peer", record);
    xtel_bench::report_window_ratios(state, name, "peer_whole", whole);
    state.SetItemsProcessed(2 * xtel_bench::flush_every * state.iterations());
}

void BM_peer_paired_prometheus(benchmark::State& state) {
    BM_peer_paired<xtel::prometheus_telemetry>(state, "prometheus");
}
BENCHMARK(BM_peer_paired_prometheus)->Name("BM_peer_paired/prometheus");

void BM_peer_paired_node(benchmark::State& state) {
    BM_peer_paired<xtel::pipeline_of<xtel::node_exporter>>(state, "node");
}
BENCHMARK(BM_peer_paired_node)->Name("BM_peer_paired/node");

}  // namespace
