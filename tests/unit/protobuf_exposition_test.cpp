// The protobuf exposition (render(..., exposition::protobuf)), decoded with libprotobuf's
// classes generated from proto/prometheus_metrics.proto: what Prometheus reads from it.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "prometheus_metrics.pb.h"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace protobuf_exposition_test {

namespace pc = xtel::promclient;
using xtel::metrics::exposition;
using xtel::metrics::family_spec;
using xtel::metrics::metric_store;
using xtel::metrics::metric_type;

namespace {

using snapshots = std::vector<std::shared_ptr<const xtel::metrics::snapshot>>;

/// A body's delimited MetricFamily messages, each with the bytes it was decoded from; fails the
/// test when the body is not a sequence of them.
struct decoded {
    std::vector<pc::MetricFamily> families;
    std::vector<std::string> bytes;
};

decoded decode(const std::string& body) {
    decoded d;
    std::size_t at = 0;
    while (at < body.size()) {
        std::uint64_t length = 0;
        int shift = 0;
        while (true) {
            REQUIRE(at < body.size());
            const auto b = static_cast<unsigned char>(body[at++]);
            length |= std::uint64_t{b & 0x7Fu} << shift;
            shift += 7;
            if (b < 0x80) {
                break;
            }
        }
        REQUIRE(length <= body.size() - at);
        pc::MetricFamily f;
        REQUIRE(f.ParseFromArray(body.data() + at, static_cast<int>(length)));
        d.bytes.push_back(body.substr(at, length));
        d.families.push_back(std::move(f));
        at += length;
    }
    return d;
}

std::string rendered(const snapshots& s, exposition format) {
    std::string out;
    xtel::metrics::render(s, out, format);
    return out;
}

const pc::MetricFamily& family(const decoded& d, std::string_view name) {
    for (const auto& f : d.families) {
        if (f.name() == name) {
            return f;
        }
    }
    FAIL("no family " << name);
    throw;  // unreachable
}

std::string label_of(const pc::Metric& m, std::string_view name) {
    for (const auto& l : m.label()) {
        if (l.name() == name) {
            return l.value();
        }
    }
    return "<none>";
}

family_spec latency(std::string name, bool native, std::vector<double> bounds, int schema = 0) {
    family_spec spec;
    spec.name = std::move(name);
    spec.help = "Transfer time";
    spec.type = metric_type::histogram;
    spec.label_names = {"op"};
    spec.decimals = 6;
    spec.bounds = std::move(bounds);
    spec.unit = "seconds";
    spec.native = native;
    spec.native_schema = static_cast<std::int8_t>(schema);
    return spec;
}

xtel::metrics::exemplar traced(std::string request) {
    xtel::metrics::exemplar e;
    e.label_name = "request_id";
    e.label_value = std::move(request);
    e.timestamp_us = 1'700'000'000'250'000;
    for (std::size_t i = 0; i < e.trace_id.size(); ++i) {
        e.trace_id[i] = static_cast<std::uint8_t>(0xA0 + i);
    }
    for (std::size_t i = 0; i < e.span_id.size(); ++i) {
        e.span_id[i] = static_cast<std::uint8_t>(i + 1);
    }
    return e;
}

std::shared_ptr<const xtel::metrics::snapshot> snapshot_of(const metric_store& store,
                                                           std::string agent,
                                                           std::uint64_t start_us = 0) {
    auto s = xtel::metrics::take_snapshot(store, {{"agent_name", std::move(agent)}});
    s.start_time_us = start_us;
    return std::make_shared<const xtel::metrics::snapshot>(std::move(s));
}

}  // namespace

TEST_CASE(
    "protobuf: counters, gauges and summaries decode with their values shown as the text "
    "shows them",
    "[protobuf_exposition]") {
    metric_store store;
    const auto c = store.add_family({.name = "xfer_bytes_total",
                                     .help = "Bytes moved",
                                     .type = metric_type::counter,
                                     .label_names = {"peer"}});
    const auto g = store.add_family({.name = "queue_seconds",
                                     .help = "Queue time",
                                     .type = metric_type::gauge,
                                     .decimals = 6,
                                     .unit = "seconds"});
    const auto s = store.add_family(
        {.name = "post_seconds", .help = "Post time", .type = metric_type::summary, .decimals = 6});
    store.add(c, {"b"}, 4096);
    store.set(g, {}, 450);  // 0.000450 s
    store.observe(s, {}, 1'500'000);
    store.observe(s, {}, 250);
    const auto d =
        decode(rendered({snapshot_of(store, "a1", 1'700'000'000'123'456)}, exposition::protobuf));

    const auto& counter = family(d, "xfer_bytes_total");
    CHECK(counter.type() == pc::COUNTER);
    CHECK(counter.help() == "Bytes moved");
    REQUIRE(counter.metric_size() == 1);
    CHECK(label_of(counter.metric(0), "agent_name") == "a1");
    CHECK(label_of(counter.metric(0), "peer") == "b");
    CHECK(counter.metric(0).label(0).name() == "agent_name");  // the snapshot's labels first
    CHECK(counter.metric(0).counter().value() == 4096.0);
    CHECK(counter.metric(0).counter().created_timestamp().seconds() == 1'700'000'000);
    CHECK(counter.metric(0).counter().created_timestamp().nanos() == 123'456'000);

    const auto& gauge = family(d, "queue_seconds");
    CHECK(gauge.type() == pc::GAUGE);
    CHECK(gauge.unit() == "seconds");
    CHECK(gauge.metric(0).gauge().value() == 0.000450);

    const auto& summary = family(d, "post_seconds");
    CHECK(summary.type() == pc::SUMMARY);
    CHECK(summary.metric(0).summary().sample_count() == 2);
    CHECK(summary.metric(0).summary().sample_sum() == 1.50025);
}

TEST_CASE(
    "protobuf: a classic histogram has cumulative buckets with +Inf and OpenMetrics' "
    "exemplar labels",
    "[protobuf_exposition]") {
    metric_store store;
    const auto h = store.add_family(latency("lat_seconds", false, {100, 1000}));
    store.observe(store.series_of(h, {"write"}), 50, traced("r1"));
    store.observe(h, {"write"}, 500);
    xtel::metrics::exemplar untraced;
    untraced.label_name = "request_id";
    untraced.label_value = "r9";
    store.observe(store.series_of(h, {"write"}), 5000, untraced);
    const auto d = decode(rendered({snapshot_of(store, "a1")}, exposition::protobuf));

    const auto& f = family(d, "lat_seconds");
    CHECK(f.type() == pc::HISTOGRAM);
    const auto& hist = f.metric(0).histogram();
    CHECK(hist.sample_count() == 3);
    CHECK(hist.sample_sum() == 0.00555);
    REQUIRE(hist.bucket_size() == 3);
    CHECK(hist.bucket(0).upper_bound() == 0.0001);
    CHECK(hist.bucket(0).cumulative_count() == 1);
    CHECK(hist.bucket(1).upper_bound() == 0.001);
    CHECK(hist.bucket(1).cumulative_count() == 2);
    CHECK(hist.bucket(2).upper_bound() == std::numeric_limits<double>::infinity());
    CHECK(hist.bucket(2).cumulative_count() == 3);
    // No native field: Prometheus 2.42 reads it as a classic histogram.
    CHECK(hist.zero_threshold() == 0);
    CHECK(hist.positive_span_size() == 0);
    CHECK(!hist.has_created_timestamp());  // the snapshot has no start time

    const auto& first = hist.bucket(0).exemplar();
    REQUIRE(first.label_size() == 3);
    CHECK(first.label(0).name() == "trace_id");
    CHECK(first.label(0).value() == "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    CHECK(first.label(1).name() == "span_id");
    CHECK(first.label(1).value() == "0102030405060708");
    CHECK(first.label(2).name() == "request_id");
    CHECK(first.label(2).value() == "r1");
    CHECK(first.value() == 0.00005);
    CHECK(first.timestamp().seconds() == 1'700'000'000);
    CHECK(first.timestamp().nanos() == 250'000'000);
    CHECK(!hist.bucket(1).has_exemplar());
    REQUIRE(hist.bucket(2).exemplar().label_size() == 1);
    CHECK(hist.bucket(2).exemplar().label(0).value() == "r9");
    CHECK(hist.bucket(2).exemplar().value() == 0.005);
    CHECK(!hist.bucket(2).exemplar().has_timestamp());
}

TEST_CASE("protobuf: a native histogram has its schema, zero bucket, spans and deltas",
          "[protobuf_exposition]") {
    metric_store store;
    auto spec = latency("nat", true, {});
    spec.decimals = 0;
    spec.unit.clear();
    const auto h = store.add_family(spec);
    // Schema 0: bucket i holds (2^(i-1), 2^i]. 0 is in the zero bucket; 1 in bucket 0, 2 in 1,
    // 3 and 4 in 2, 100 in 7: buckets 0..2 and 7, four empty between (more than 2: two spans).
    for (const std::uint64_t v : {0, 1, 2, 3, 4, 100}) {
        store.observe(h, {"read"}, v);
    }
    const auto d =
        decode(rendered({snapshot_of(store, "a1", 1'700'000'000'000'000)}, exposition::protobuf));

    const auto& hist = family(d, "nat").metric(0).histogram();
    CHECK(hist.sample_count() == 6);
    CHECK(hist.sample_sum() == 110.0);
    CHECK(hist.bucket_size() == 0);  // native only: no classic bucket
    CHECK(hist.schema() == 0);
    CHECK(hist.zero_threshold() == std::ldexp(1.0, -128));
    CHECK(hist.zero_count() == 1);
    REQUIRE(hist.positive_span_size() == 2);
    CHECK(hist.positive_span(0).offset() == 0);
    CHECK(hist.positive_span(0).length() == 3);
    CHECK(hist.positive_span(1).offset() == 4);
    CHECK(hist.positive_span(1).length() == 1);
    REQUIRE(hist.positive_delta_size() == 4);
    CHECK(hist.positive_delta(0) == 1);
    CHECK(hist.positive_delta(1) == 0);
    CHECK(hist.positive_delta(2) == 1);
    CHECK(hist.positive_delta(3) == -1);
    CHECK(hist.negative_span_size() == 0);
    CHECK(hist.created_timestamp().seconds() == 1'700'000'000);
}

TEST_CASE("protobuf: native buckets are over the shown value, at the series' schema",
          "[protobuf_exposition]") {
    metric_store store;
    const auto h = store.add_family(latency("lat_seconds", true, {}, 3));
    store.observe(h, {"read"}, 450);    // 0.000450 s
    store.observe(h, {"read"}, 2'000);  // 0.002 s
    const auto d = decode(rendered({snapshot_of(store, "a1")}, exposition::protobuf));

    const auto& hist = family(d, "lat_seconds").metric(0).histogram();
    CHECK(hist.schema() == 3);
    // The bucket of v at schema 3 is ceil(8 log2 v): 0.00045 -> ceil(-88.94) = -88;
    // 0.002 -> ceil(-71.73) = -71; 17 apart, so two spans.
    REQUIRE(hist.positive_span_size() == 2);
    CHECK(hist.positive_span(0).offset() == -88);
    CHECK(hist.positive_span(0).length() == 1);
    CHECK(hist.positive_span(1).offset() == -71 - (-88 + 1));
    CHECK(hist.positive_span(1).length() == 1);
    REQUIRE(hist.positive_delta_size() == 2);
    CHECK(hist.positive_delta(0) == 1);
    CHECK(hist.positive_delta(1) == 0);
    CHECK(std::pow(2.0, -89 / 8.0) < 0.00045);
    CHECK(0.00045 <= std::pow(2.0, -88 / 8.0));
}

TEST_CASE("protobuf: a native histogram without observations still reads as native",
          "[protobuf_exposition]") {
    metric_store store;
    const auto h = store.add_family(latency("lat_seconds", true, {}, 3));
    store.series_of(h, {"read"});
    const auto d = decode(rendered({snapshot_of(store, "a1")}, exposition::protobuf));

    const auto& hist = family(d, "lat_seconds").metric(0).histogram();
    // What Prometheus 2.42 checks (textparse.isNativeHistogram): deltas, a zero count, or a
    // zero threshold above 0. Later versions look for a span: an empty one is there.
    CHECK(hist.zero_threshold() > 0);
    REQUIRE(hist.positive_span_size() == 1);
    CHECK(hist.positive_span(0).offset() == 0);
    CHECK(hist.positive_span(0).length() == 0);
    CHECK(hist.positive_delta_size() == 0);
    CHECK(hist.sample_count() == 0);
    CHECK(hist.schema() == 3);
}

TEST_CASE(
    "protobuf: a histogram kept both ways has classic buckets and native fields in one "
    "Histogram",
    "[protobuf_exposition]") {
    metric_store store;
    const auto h = store.add_family(latency("lat_seconds", true, {1000}, 3));
    store.observe(store.series_of(h, {"read"}), 450, traced("r2"));
    store.observe(h, {"read"}, 2'000);
    const auto d = decode(rendered({snapshot_of(store, "a1")}, exposition::protobuf));

    const auto& hist = family(d, "lat_seconds").metric(0).histogram();
    REQUIRE(hist.bucket_size() == 2);
    CHECK(hist.bucket(0).cumulative_count() == 1);
    CHECK(hist.bucket(0).exemplar().label(2).value() == "r2");
    CHECK(hist.bucket(1).cumulative_count() == 2);
    CHECK(hist.schema() == 3);
    CHECK(hist.positive_delta_size() == 2);
    CHECK(hist.exemplars_size() == 0);  // the classic buckets carry them
}

TEST_CASE("protobuf: a native-only histogram's exemplar is in Histogram.exemplars",
          "[protobuf_exposition]") {
    metric_store store;
    const auto h = store.add_family(latency("lat_seconds", true, {}, 3));
    store.observe(store.series_of(h, {"read"}), 450, traced("r3"));
    const auto d = decode(rendered({snapshot_of(store, "a1")}, exposition::protobuf));

    const auto& hist = family(d, "lat_seconds").metric(0).histogram();
    CHECK(hist.bucket_size() == 0);
    REQUIRE(hist.exemplars_size() == 1);
    CHECK(hist.exemplars(0).label(2).value() == "r3");
    CHECK(hist.exemplars(0).value() == 0.00045);
}

TEST_CASE(
    "protobuf: families merge across agents as in the text, one MetricFamily per run of "
    "agents that agree on native",
    "[protobuf_exposition]") {
    metric_store classic;
    metric_store native;
    metric_store other;
    classic.observe(classic.add_family(latency("lat_seconds", false, {1000})), {"read"}, 10);
    native.observe(native.add_family(latency("lat_seconds", true, {}, 3)), {"read"}, 20);
    other.observe(other.add_family(latency("lat_seconds", true, {}, 3)), {"read"}, 30);
    const auto d = decode(
        rendered({snapshot_of(native, "a1"), snapshot_of(other, "a2"), snapshot_of(classic, "a3")},
                 exposition::protobuf));

    // Prometheus 2.42 reads a whole MetricFamily as native or classic by its first series.
    // Then the store's folded-updates family, by name.
    REQUIRE(d.families.size() == 3);
    CHECK(d.families[0].name() == "lat_seconds");
    CHECK(d.families[1].name() == "lat_seconds");
    CHECK(d.families[2].name() == "xtel_metrics_series_folded_total");
    REQUIRE(d.families[0].metric_size() == 2);
    CHECK(label_of(d.families[0].metric(0), "agent_name") == "a1");
    CHECK(label_of(d.families[0].metric(1), "agent_name") == "a2");
    CHECK(d.families[0].metric(1).histogram().sample_sum() == 0.00003);
    CHECK(d.families[0].metric(1).histogram().zero_threshold() > 0);
    REQUIRE(d.families[1].metric_size() == 1);
    CHECK(label_of(d.families[1].metric(0), "agent_name") == "a3");
    CHECK(d.families[1].metric(0).histogram().zero_threshold() == 0);
    CHECK(d.families[1].metric(0).histogram().bucket(0).cumulative_count() == 1);
}

TEST_CASE("protobuf: the bytes are those libprotobuf writes for the same messages",
          "[protobuf_exposition]") {
    metric_store store;
    store.add(store.add_family({.name = "n_total", .help = "N", .type = metric_type::counter}), {},
              7);
    const auto h = store.add_family(latency("lat_seconds", true, {100, 1000}, 3));
    store.observe(store.series_of(h, {"read"}), 450, traced("r1"));
    store.observe(h, {"read"}, 0);
    store.observe(h, {"write"}, 9'000'000);
    const auto body =
        rendered({snapshot_of(store, "a1", 1'700'000'000'000'001), snapshot_of(store, "a2")},
                 exposition::protobuf);
    const auto d = decode(body);
    REQUIRE(d.families.size() == 3);  // n_total, lat_seconds, the folded-updates family
    for (std::size_t i = 0; i < d.families.size(); ++i) {
        CHECK(d.families[i].SerializeAsString() == d.bytes[i]);
    }
}

TEST_CASE("protobuf: labels and help that are not UTF-8 show U+FFFD, as in the text",
          "[protobuf_exposition]") {
    metric_store store;
    store.add(store.add_family({.name = "n_total",
                                .help = "bad \xFF help",
                                .type = metric_type::counter,
                                .label_names = {"peer"}}),
              {"p\xC3"}, 1);
    const auto d = decode(rendered({snapshot_of(store, "a1")}, exposition::protobuf));
    const auto& f = family(d, "n_total");
    CHECK(f.help() == "bad \xEF\xBF\xBD help");
    CHECK(label_of(f.metric(0), "peer") == "p\xEF\xBF\xBD");
}

}  // namespace protobuf_exposition_test
