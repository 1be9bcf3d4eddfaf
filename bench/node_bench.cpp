// The node exporter and xtel-exporter (docs/performance.md, "The node exporter and
// xtel-exporter"): what an agent pays per flush to publish its snapshot into its node file, what
// one scrape of xtel-exporter costs over 64 agents' files of 1,000 series each, what one
// remote-write request of the same costs to encode, and the record path of a pipeline with the
// node exporter (BM_transfer_tax/node, against the other BM_transfer_tax cases of the same run).

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
// The collector, the renderer, the compressor and the remote-write encoder are private to the
// library: reached from src/ (bench/CMakeLists.txt).
#include "node_fixture.hpp"
#include "xtel/http/gzip.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/node/collector.hpp"
#ifdef XTEL_BENCH_REMOTE_WRITE
#include "xtel/push/otlp.hpp"
#include "xtel/push/remote_write.hpp"
#endif
#include "xtel/core/log.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace {

using xtel_bench::pin_scope;
using xtel_bench::series_unit;

/// The collector as xtel-exporter runs it, with room for the largest node measured here
/// (64 x 1,000 model series: 415,000 time series, past the default cap).
xtel::node::collector::settings collector_settings(const std::filesystem::path& dir) {
    return {.dir = dir,
            .stale_ttl = std::chrono::seconds(60),
            .program = "xtel_bench",
            .max_series = 10'000'000};
}

/// One flush's publication by an agent whose snapshot has state.range(0) series (at least; the
/// counters say how many), counted as Prometheus counts them (time series: each histogram bucket
/// one) or, in the _model cases, as the metric model does (a histogram one): what
/// node_exporter::on_flush_end does when the metrics changed: the snapshot taken, encoded, and
/// published into the node file (in a scratch directory on /dev/shm). Each iteration first folds
/// one more transfer in, timer paused, so that there is something new to publish.
template <series_unit Unit>
void BM_node_publish(benchmark::State& state) {
    xtel::set_log_level(xtel::log_level::warning);
    const xtel_bench::scratch_dir dir;
    const xtel::config cfg;
    xtel::node_settings settings;
    settings.directory = dir.path();
    // Built as the pipeline builds it; the bench folds and publishes as the back end does.
    const auto m =
        std::make_shared<xtel::metrics::agent_metrics>("bench_agent", xtel_bench::model_settings());
    xtel::node_exporter e({{cfg, "bench_agent"}, m}, settings);
    const xtel_bench::agent_traffic traffic(
        xtel_bench::peers_for_series(static_cast<std::size_t>(state.range(0)), Unit));
    m->apply_transfers(traffic.records(), traffic.labels());
    m->publish();
    e.on_flush_end();

    const std::uint64_t before = e.snapshots_published();
    {
        const pin_scope pin(state.thread_index());
        std::uint64_t i = 0;
        for (auto _ : state) {
            state.PauseTiming();
            const xtel::transfer_record r = traffic.one_more(++i);
            m->apply_transfers(std::span(&r, 1), traffic.labels());
            state.ResumeTiming();
            m->publish();  // the snapshot taken, as before the back end published it
            e.on_flush_end();
        }
    }
    if (e.snapshots_published() - before != state.iterations()) {
        state.SkipWithError("a flush published no snapshot");
        return;
    }
    xtel::node::file::reader reader(e.path());
    const auto latest = reader.read_latest();
    if (!latest) {
        state.SkipWithError("the node file could not be read back");
        return;
    }
    const auto snap = xtel::metrics::decode_snapshot(latest->payload);
    state.counters["series"] = static_cast<double>(xtel_bench::series_of(snap));
    state.counters["model_series"] =
        static_cast<double>(xtel_bench::series_of(snap, series_unit::model));
    state.counters["bytes_per_publish"] = static_cast<double>(latest->payload.size());
    state.SetBytesProcessed(static_cast<std::int64_t>(latest->payload.size()) * state.iterations());
}
BENCHMARK(BM_node_publish<series_unit::time_series>)
    ->Name("BM_node_publish")
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_node_publish<series_unit::model>)
    ->Name("BM_node_publish_model")
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

/// A node: `agents` node files of `series` series each (counted in `unit`), written and held
/// open by real writers in a scratch directory, as many agents' node exporters hold theirs.
class node_fleet {
  public:
    static constexpr std::size_t agents = 64;
    static constexpr std::size_t series = 1000;

    explicit node_fleet(series_unit unit) {
        const std::size_t peers = xtel_bench::peers_for_series(series, unit);
        for (std::size_t a = 0; a < agents; ++a) {
            const std::string name = fmt::format("agent-{:02}", a);
            writers_.push_back(std::make_unique<xtel::node::file::writer>(dir_.path(), name));
            payloads_.emplace_back();
            xtel::metrics::encode_snapshot(*xtel_bench::agent_snapshot(name, peers, unit),
                                           payloads_.back());
        }
        publish_all();
    }

    /// Every agent publishes again (the same state: a reader reads and decodes each anew).
    void publish_all() {
        for (std::size_t a = 0; a < agents; ++a) {
            writers_[a]->publish(payloads_[a]);
        }
    }

    const std::filesystem::path& dir() const { return dir_.path(); }
    std::size_t payload_bytes() const {
        std::size_t n = 0;
        for (const auto& p : payloads_) {
            n += p.size();
        }
        return n;
    }

  private:
    xtel_bench::scratch_dir dir_;
    std::vector<std::unique_ptr<xtel::node::file::writer>> writers_;
    std::vector<std::vector<std::byte>> payloads_;
};

template <series_unit Unit>
node_fleet& fleet() {
    static node_fleet f(Unit);
    return f;
}

std::size_t series_of(std::span<const std::shared_ptr<const xtel::metrics::snapshot>> snaps,
                      series_unit unit = series_unit::time_series) {
    std::size_t n = 0;
    for (const auto& s : snaps) {
        n += xtel_bench::series_of(*s, unit);
    }
    return n;
}

/// What one scrape of xtel-exporter costs (tools/xtel_exporter: node_metrics::answer, less its
/// own few health series): list the directory, read and decode every file that changed, render
/// the text format, gzip it at the exporter's level (1) when range(1) says so. range(0) 1: every
/// agent published since the last scrape (the timer paused while they do), as with agents that
/// flush more often than Prometheus scrapes; 0: none did (only the listing and the render).
/// BM_node_scrape/64x1000: 1,000 time series per agent (sample lines); BM_node_scrape_model:
/// 1,000 series of the metric model per agent, about six and a half times as many sample lines,
/// since half of them are histograms of 18 buckets.
template <series_unit Unit>
void BM_node_scrape(benchmark::State& state) {
    xtel::set_log_level(xtel::log_level::warning);
    node_fleet& f = fleet<Unit>();
    const bool changed = state.range(0) != 0;
    const bool zip = state.range(1) != 0;
    xtel::node::collector collector(collector_settings(f.dir()));
    const pin_scope pin(state.thread_index());
    std::size_t plain = 0;
    std::size_t sent = 0;
    std::size_t served = 0;
    std::size_t series = 0;
    std::size_t model_series = 0;
    for (auto _ : state) {
        if (changed) {
            state.PauseTiming();
            f.publish_all();
            state.ResumeTiming();
        }
        collector.scan();
        const auto snapshots = collector.refresh(xtel::node::collector::clock::now());
        std::string body;
        body.reserve(plain);
        // Native histograms reach Prometheus only in the protobuf exposition.
        xtel::metrics::render(snapshots, body,
                              Unit == series_unit::native ? xtel::metrics::exposition::protobuf
                                                          : xtel::metrics::exposition::text);
        plain = body.size();
        sent = plain;
        if (zip) {
            const std::string zipped = xtel::http::gzip(body, 1);
            sent = zipped.size();
            benchmark::DoNotOptimize(zipped.data());
        }
        benchmark::DoNotOptimize(body.data());
        served = snapshots.size();
        series = series_of(snapshots);
        model_series = series_of(snapshots, series_unit::model);
    }
    if (served != node_fleet::agents) {
        state.SkipWithError("not every node file was served");
        return;
    }
    state.counters["agents"] = static_cast<double>(served);
    state.counters["series"] = static_cast<double>(series);
    state.counters["model_series"] = static_cast<double>(model_series);
    state.counters["plain_bytes"] = static_cast<double>(plain);
    state.counters["sent_bytes"] = static_cast<double>(sent);
}
BENCHMARK(BM_node_scrape<series_unit::time_series>)
    ->Name("BM_node_scrape/64x1000")
    ->ArgNames({"changed", "gzip"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_scrape<series_unit::model>)
    ->Name("BM_node_scrape_model/64x1000")
    ->ArgNames({"changed", "gzip"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Unit(benchmark::kMillisecond);
/// The same model series with the latency histograms native, rendered in the protobuf
/// exposition a Prometheus with native histograms asks for.
BENCHMARK(BM_node_scrape<series_unit::native>)
    ->Name("BM_node_scrape_native/64x1000")
    ->ArgNames({"changed", "gzip"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Unit(benchmark::kMillisecond);

/// The collector's share of a scrape after every agent published: list, read and decode the 64
/// files (BM_node_scrape/64x1000/changed:1/gzip:0 less this is the render's share).
template <series_unit Unit>
void BM_node_collect(benchmark::State& state) {
    xtel::set_log_level(xtel::log_level::warning);
    node_fleet& f = fleet<Unit>();
    xtel::node::collector collector(collector_settings(f.dir()));
    const pin_scope pin(state.thread_index());
    std::size_t served = 0;
    for (auto _ : state) {
        state.PauseTiming();
        f.publish_all();
        state.ResumeTiming();
        collector.scan();
        const auto snapshots = collector.refresh(xtel::node::collector::clock::now());
        served = snapshots.size();
        benchmark::DoNotOptimize(snapshots.data());
    }
    state.counters["agents"] = static_cast<double>(served);
    state.counters["payload_bytes"] = static_cast<double>(f.payload_bytes());
    state.SetBytesProcessed(static_cast<std::int64_t>(f.payload_bytes()) * state.iterations());
}
BENCHMARK(BM_node_collect<series_unit::time_series>)
    ->Name("BM_node_collect/64x1000")
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_collect<series_unit::model>)
    ->Name("BM_node_collect_model/64x1000")
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_collect<series_unit::native>)
    ->Name("BM_node_collect_native/64x1000")
    ->Unit(benchmark::kMillisecond);

#ifdef XTEL_BENCH_REMOTE_WRITE
/// One remote-write request of the 64 agents' snapshots (as the collector serves them, the pid
/// label added): the WriteRequest encoded (protobuf) and compressed (snappy), what xtel-exporter
/// pushes every interval.
template <series_unit Unit>
void BM_node_remote_write(benchmark::State& state) {
    xtel::set_log_level(xtel::log_level::warning);
    node_fleet& f = fleet<Unit>();
    xtel::node::collector collector(collector_settings(f.dir()));
    collector.scan();
    const auto snapshots = collector.refresh(xtel::node::collector::clock::now());
    const pin_scope pin(state.thread_index());
    std::size_t bytes = 0;
    std::int64_t ts_ms = 1'732'460'000'000;
    for (auto _ : state) {
        const std::string body = xtel::push::encode_write_request(snapshots, ts_ms += 15'000);
        bytes = body.size();
        benchmark::DoNotOptimize(body.data());
    }
    state.counters["agents"] = static_cast<double>(snapshots.size());
    state.counters["series"] = static_cast<double>(series_of(snapshots));
    state.counters["bytes_per_request"] = static_cast<double>(bytes);
}
BENCHMARK(BM_node_remote_write<series_unit::time_series>)
    ->Name("BM_node_remote_write/64x1000")
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_remote_write<series_unit::model>)
    ->Name("BM_node_remote_write_model/64x1000")
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_remote_write<series_unit::native>)
    ->Name("BM_node_remote_write_native/64x1000")
    ->Unit(benchmark::kMillisecond);

/// One OTLP export of the 64 agents' snapshots (as the collector serves them): the
/// ExportMetricsServiceRequest built and encoded, range(0) 0 binary protobuf, 1 OTLP JSON;
/// range(1) 1: gzipped at level 1 as xtel-exporter sends it with compression on. Cumulative:
/// delta adds a lookup per series (BM_node_otlp_delta).
template <series_unit Unit, xtel::push::otlp_temporality Temporality>
void BM_node_otlp(benchmark::State& state) {
    xtel::set_log_level(xtel::log_level::warning);
    node_fleet& f = fleet<Unit>();
    xtel::node::collector collector(collector_settings(f.dir()));
    collector.scan();
    const auto snapshots = collector.refresh(xtel::node::collector::clock::now());
    const auto encoding =
        state.range(0) == 0 ? xtel::push::otlp_encoding::protobuf : xtel::push::otlp_encoding::json;
    const bool gzip = state.range(1) != 0;
    xtel::push::otlp_encoder encoder({"bench", "node-0", {}}, Temporality);
    const pin_scope pin(state.thread_index());
    std::size_t bytes = 0;
    std::uint64_t now_ns = 1'732'460'000'000'000'000;
    for (auto _ : state) {
        std::string body = encoder.encode(snapshots, now_ns += 15'000'000'000, encoding);
        if (gzip) {
            body = xtel::http::gzip(body, 1);
        }
        bytes = body.size();
        benchmark::DoNotOptimize(body.data());
    }
    state.counters["series"] = static_cast<double>(series_of(snapshots));
    state.counters["bytes_per_export"] = static_cast<double>(bytes);
}
BENCHMARK(BM_node_otlp<series_unit::time_series, xtel::push::otlp_temporality::cumulative>)
    ->Name("BM_node_otlp/64x1000")
    ->ArgNames({"json", "gzip"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_otlp<series_unit::model, xtel::push::otlp_temporality::cumulative>)
    ->Name("BM_node_otlp_model/64x1000")
    ->ArgNames({"json", "gzip"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_otlp<series_unit::native, xtel::push::otlp_temporality::cumulative>)
    ->Name("BM_node_otlp_native/64x1000")
    ->ArgNames({"json", "gzip"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_node_otlp<series_unit::time_series, xtel::push::otlp_temporality::delta>)
    ->Name("BM_node_otlp_delta/64x1000")
    ->ArgNames({"json", "gzip"})
    ->Args({0, 0})
    ->Unit(benchmark::kMillisecond);
#endif

/// The record path of a pipeline with the node exporter, its flusher running and its file in a
/// scratch directory: the node exporter works only at flush, so this should read as
/// BM_transfer_tax/prometheus (the same metric model, fed on the flusher thread).
using node_telemetry = xtel::pipeline_of<xtel::node_exporter>;

struct node_env {
    xtel_bench::scratch_dir dir;
    xtel::config cfg;
    node_env() {
        xtel::set_log_level(xtel::log_level::warning);
        cfg.enabled = true;
        cfg.exporters = {"node"};
        cfg.output_path = dir.path().string();
    }
};

std::unique_ptr<node_env> shared_env;
std::unique_ptr<node_telemetry> shared_node;

void BM_transfer_tax_node(benchmark::State& state) {
    if (state.thread_index() == 0) {
        shared_env = std::make_unique<node_env>();
        shared_node = std::make_unique<node_telemetry>(
            shared_env->cfg, "bench", xtel::telemetry_options{.start_flusher = true});
    }
    xtel_bench::transfer_tax_loop(state, shared_node);
    if (state.thread_index() == 0) {
        shared_node.reset();
        shared_env.reset();
    }
}
BENCHMARK(BM_transfer_tax_node)->Name("BM_transfer_tax/node");
BENCHMARK(BM_transfer_tax_node)->Name("BM_transfer_tax/node")->Threads(2);

/// BM_transfer_tax/node with every transfer tagged with a traceparent: the id's slot on the
/// record path, and at flush the id copied out and the sampler's decision (the traceparent
/// parsed). Tracing runs at its defaults (NIXL_TELEMETRY_TRACE_*): this trace is not among the
/// 1% sampled and no transfer reaches the 10 ms threshold, so no span is written: the cost
/// every tagged transfer pays, not the rare span's.
void BM_transfer_tax_node_tagged(benchmark::State& state) {
    if (state.thread_index() == 0) {
        shared_env = std::make_unique<node_env>();
        shared_node = std::make_unique<node_telemetry>(
            shared_env->cfg, "bench", xtel::telemetry_options{.start_flusher = true});
    }
    xtel_bench::transfer_tax_loop<true>(state, shared_node);
    if (state.thread_index() == 0) {
        shared_node.reset();
        shared_env.reset();
    }
}
BENCHMARK(BM_transfer_tax_node_tagged)->Name("BM_transfer_tax/node_tagged");

}  // namespace
