// The protobuf exposition: the hand-written encoder (render(..., exposition::protobuf)) against
// building the same messages with libprotobuf's generated classes and serializing them, on the
// same snapshots; the text and OpenMetrics bodies of them as baselines. The libprotobuf case
// checks once that its bytes are the encoder's, so both measure the same body.
//
//   xtel_bench --benchmark_filter=BM_protobuf_exposition

#ifdef XTEL_BENCH_PROTOBUF_EXPOSITION

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "prometheus_metrics.pb.h"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace {

namespace pc = xtel::promclient;
using snapshots = std::vector<std::shared_ptr<const xtel::metrics::snapshot>>;

/// Two agents of 2,000 series each: 1,000 counters and 1,000 latency histograms kept both ways
/// (10 classic bounds with exemplars, native buckets at schema 3), over 500 peers and 2 ops.
snapshots fixture() {
    using xtel::metrics::metric_type;
    snapshots out;
    for (const char* agent : {"prefill_0", "decode_0"}) {
        xtel::metrics::metric_store store({.max_series = 5000});
        const auto bytes = store.add_family({.name = "xtel_kv_bytes_total",
                                             .help = "Bytes moved.",
                                             .type = metric_type::counter,
                                             .label_names = {"peer", "op"},
                                             .unit = "bytes"});
        const auto latency =
            store.add_family({.name = "xtel_kv_latency_seconds",
                              .help = "Seconds from post to completion.",
                              .type = metric_type::histogram,
                              .label_names = {"peer", "op"},
                              .decimals = 6,
                              .bounds = {50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000},
                              .unit = "seconds",
                              .native = true,
                              .native_schema = 3});
        std::uint64_t n = 0;
        for (int peer = 0; peer < 500; ++peer) {
            const std::string p = fmt::format("decode-{:03}", peer);
            for (const char* op : {"read", "write"}) {
                store.add(bytes, {p, op}, ++n * 4096);
                const auto s = store.series_of(latency, {p, op});
                for (std::uint64_t i = 0; i < 40; ++i) {
                    const std::uint64_t us = 1 + (++n * 7919) % 80000;
                    store.observe(s, us,
                                  {"request_id", fmt::format("kv-{}", n), 0,
                                   1'732'460'000'000'000 + n * 1000});
                }
            }
        }
        auto snap = xtel::metrics::take_snapshot(store, {{"agent_name", agent}});
        snap.start_time_us = 1'732'400'000'000'000;
        out.push_back(std::make_shared<const xtel::metrics::snapshot>(std::move(snap)));
    }
    return out;
}

double scaled(std::uint64_t v, std::uint8_t decimals) {
    return static_cast<double>(v) / std::pow(10.0, decimals);
}

void set_timestamp(pc::Timestamp* t, std::uint64_t us) {
    t->set_seconds(static_cast<std::int64_t>(us / 1'000'000));
    t->set_nanos(static_cast<std::int32_t>(us % 1'000'000 * 1'000));
}

void set_exemplar(pc::Exemplar* e, const xtel::metrics::exemplar& x, std::uint8_t decimals) {
    auto* l = e->add_label();
    l->set_name(x.label_name);
    l->set_value(x.label_value);
    e->set_value(scaled(x.value, decimals));
    set_timestamp(e->mutable_timestamp(), x.timestamp_us);
}

/// The fixture's body built with libprotobuf: the families of every snapshot (they have the
/// same ones, in the same order) merged by name, as render() merges them.
void build_with_libprotobuf(const snapshots& in, std::string& out) {
    std::vector<std::int64_t> deltas;
    std::vector<xtel::metrics::native::bucket_span> spans;
    pc::MetricFamily f;
    for (std::size_t j = 0; j < in[0]->families.size(); ++j) {
        f.Clear();
        const auto& spec = in[0]->families[j].spec;
        f.set_name(spec.name);
        f.set_help(spec.help);
        f.set_type(spec.type == xtel::metrics::metric_type::counter ? pc::COUNTER : pc::HISTOGRAM);
        f.set_unit(spec.unit);
        for (const auto& snap : in) {
            for (const auto& s : snap->families[j].series) {
                auto* m = f.add_metric();
                for (const auto& l : snap->labels) {
                    auto* p = m->add_label();
                    p->set_name(l.name);
                    p->set_value(l.value);
                }
                for (std::size_t i = 0; i < spec.label_names.size(); ++i) {
                    auto* p = m->add_label();
                    p->set_name(spec.label_names[i]);
                    p->set_value(s.label_values[i]);
                }
                if (spec.type == xtel::metrics::metric_type::counter) {
                    m->mutable_counter()->set_value(scaled(s.value, spec.decimals));
                    set_timestamp(m->mutable_counter()->mutable_created_timestamp(),
                                  snap->start_time_us);
                    continue;
                }
                auto* h = m->mutable_histogram();
                h->set_sample_count(s.count);
                h->set_sample_sum(scaled(s.sum, spec.decimals));
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i <= spec.bounds.size(); ++i) {
                    const bool inf = i == spec.bounds.size();
                    cumulative = inf ? s.count : cumulative + s.buckets[i];
                    auto* b = h->add_bucket();
                    b->set_cumulative_count(cumulative);
                    b->set_upper_bound(inf ? INFINITY : scaled(spec.bounds[i], spec.decimals));
                    if (i < s.exemplars.size() && !s.exemplars[i].label_value.empty()) {
                        set_exemplar(b->mutable_exemplar(), s.exemplars[i], spec.decimals);
                    }
                }
                h->set_schema(s.native_schema);
                h->set_zero_threshold(xtel::metrics::native::zero_threshold);
                h->set_zero_count(s.zero_count);
                xtel::metrics::native::to_spans(s.native_first, s.native_buckets, spans, deltas);
                for (const auto& sp : spans) {
                    auto* p = h->add_positive_span();
                    p->set_offset(sp.offset);
                    p->set_length(sp.length);
                }
                for (const auto d : deltas) {
                    h->add_positive_delta(d);
                }
                set_timestamp(h->mutable_created_timestamp(), snap->start_time_us);
            }
        }
        const std::size_t size = f.ByteSizeLong();
        std::uint64_t v = size;
        while (v >= 0x80) {
            out += static_cast<char>(v | 0x80);
            v >>= 7;
        }
        out += static_cast<char>(v);
        f.AppendToString(&out);
    }
}

const snapshots& shared_fixture() {
    static const snapshots s = fixture();
    return s;
}

/// range(0): 0 the hand-written encoder, 1 libprotobuf, 2 text, 3 OpenMetrics.
void BM_protobuf_exposition(benchmark::State& state) {
    const auto& snaps = shared_fixture();
    const auto how = state.range(0);
    if (how == 1) {
        std::string ours;
        std::string theirs;
        xtel::metrics::render(snaps, ours, xtel::metrics::exposition::protobuf);
        build_with_libprotobuf(snaps, theirs);
        if (ours != theirs) {
            state.SkipWithError("libprotobuf's body is not the encoder's: not the same messages");
            return;
        }
    }
    std::size_t size = 0;
    for (auto _ : state) {
        std::string body;
        body.reserve(size);
        switch (how) {
            case 0:
                xtel::metrics::render(snaps, body, xtel::metrics::exposition::protobuf);
                break;
            case 1:
                build_with_libprotobuf(snaps, body);
                break;
            case 2:
                xtel::metrics::render(snaps, body, xtel::metrics::exposition::text);
                break;
            default:
                xtel::metrics::render(snaps, body, xtel::metrics::exposition::openmetrics);
                break;
        }
        size = body.size();
        benchmark::DoNotOptimize(body.data());
    }
    state.counters["bytes"] = static_cast<double>(size);
    state.SetBytesProcessed(static_cast<std::int64_t>(size) * state.iterations());
    state.SetLabel(how == 0   ? "hand-written"
                   : how == 1 ? "libprotobuf"
                   : how == 2 ? "text"
                              : "openmetrics");
}
BENCHMARK(BM_protobuf_exposition)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace

#endif  // XTEL_BENCH_PROTOBUF_EXPOSITION
