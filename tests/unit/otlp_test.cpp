// The OTLP client: requests decoded back with the messages of proto/ (the integration tests
// decode them with the OpenTelemetry JS project's definitions instead), its JSON form, the
// temporality state, the OTEL_* settings, and the sender's OTLP rules against a local server.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fake_receiver.hpp"
#include "native_snapshot.hpp"
#include "otlp_metrics.pb.h"
#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/push/otlp.hpp"
#include "xtel/push/otlp_config.hpp"
#include "xtel/push/push_url.hpp"
#include "xtel/trace/context.hpp"

namespace otlp_test {

using namespace xtel;
using namespace std::chrono_literals;
using xtel_test::eventually;
namespace pb = xtel::otlp;

namespace {

using snapshots = std::vector<std::shared_ptr<const metrics::snapshot>>;

constexpr std::uint64_t start_us = 1'700'000'000'000'000;
constexpr std::uint64_t t1 = 1'700'000'010'000'000'000;
constexpr std::uint64_t t2 = 1'700'000'020'000'000'000;

metrics::series counter_series(std::vector<std::string> labels, std::uint64_t v) {
    metrics::series s;
    s.label_values = std::move(labels);
    s.value = v;
    return s;
}

/// An agent's snapshot: a counter of bytes by peer, a gauge, a histogram of seconds kept in
/// µs with two bounds and exemplars, a summary.
std::shared_ptr<metrics::snapshot> agent(std::uint64_t bytes,
                                         std::vector<std::uint64_t> buckets,
                                         std::uint64_t count,
                                         std::uint64_t sum_us,
                                         std::uint64_t started_us = start_us) {
    auto s = std::make_shared<metrics::snapshot>();
    s->labels = {{"agent_name", "prefill-0"}, {"rank", "3"}, {"pid", "4242"}};
    s->start_time_us = started_us;
    metrics::family_snapshot c;
    c.spec = {"xtel_transfer_bytes_total", "Bytes moved.", metrics::metric_type::counter, {"peer"}};
    c.spec.unit = "bytes";
    c.series = {counter_series({"decode-0"}, bytes)};
    metrics::family_snapshot g;
    g.spec = {"xtel_memory_registered_bytes", "Registered.", metrics::metric_type::gauge, {}};
    g.spec.unit = "bytes";
    g.series = {counter_series({}, 1 << 20)};
    metrics::family_snapshot h;
    h.spec = {
        "xtel_transfer_duration_seconds", "Latency.", metrics::metric_type::histogram, {"op"}};
    h.spec.decimals = 6;
    h.spec.unit = "seconds";
    h.spec.bounds = {100, 1000};
    metrics::series hs;
    hs.label_values = {"write"};
    hs.buckets = std::move(buckets);
    hs.count = count;
    hs.sum = sum_us;
    hs.exemplars = {
        {"request_id", "4bf92f3577b34da6a3ce929d0e0e4736", 90, 1'700'000'005'000'000},
        {"request_id", "req-17", 450, 1'700'000'015'000'000},
        {},
    };
    h.series = {hs};
    metrics::family_snapshot sm;
    sm.spec = {
        "xtel_exporter_scrape_duration_seconds", "Scrapes.", metrics::metric_type::summary, {}};
    sm.spec.decimals = 6;
    metrics::series ss;
    ss.count = 2;
    ss.sum = 1500;
    sm.series = {ss};
    s->families = {c, g, h, sm};
    return s;
}

pb::ExportMetricsServiceRequest decode(const std::string& body) {
    pb::ExportMetricsServiceRequest r;
    REQUIRE(r.ParseFromString(body));
    return r;
}

std::map<std::string, std::string> attributes(
    const google::protobuf::RepeatedPtrField<pb::KeyValue>& kvs) {
    std::map<std::string, std::string> out;
    for (const auto& kv : kvs) {
        const auto& v = kv.value();
        out[kv.key()] = v.value_case() == pb::AnyValue::kIntValue
                            ? "int:" + std::to_string(v.int_value())
                            : v.string_value();
    }
    return out;
}

const pb::Metric& metric(const pb::ExportMetricsServiceRequest& r, std::string_view name) {
    for (const auto& m : r.resource_metrics(0).scope_metrics(0).metrics()) {
        if (m.name() == name) {
            return m;
        }
    }
    FAIL("no metric " << name);
    throw;
}

push::otlp_resource resource() {
    return {"inference", "node-7", {{"deployment.environment", "test"}}};
}

}  // namespace

TEST_CASE("an OTLP request maps each family as the specification does", "[otlp]") {
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const auto r = decode(
        enc.encode(snapshots{agent(5000, {3, 4}, 9, 2500)}, t1, push::otlp_encoding::protobuf));
    REQUIRE(r.resource_metrics_size() == 1);
    const auto& rm = r.resource_metrics(0);
    CHECK(attributes(rm.resource().attributes()) ==
          std::map<std::string, std::string>{{"service.name", "inference"},
                                             {"service.instance.id", "node-7:prefill-0"},
                                             {"host.name", "node-7"},
                                             {"deployment.environment", "test"},
                                             {"xtel.agent.name", "prefill-0"},
                                             {"xtel.rank", "int:3"},
                                             {"process.pid", "int:4242"}});
    CHECK(rm.scope_metrics(0).scope().name() == "xtel");

    const auto& bytes = metric(r, "xtel_transfer_bytes_total");
    CHECK(bytes.unit() == "By");
    CHECK(bytes.description() == "Bytes moved.");
    REQUIRE(bytes.has_sum());
    CHECK(bytes.sum().is_monotonic());
    CHECK(bytes.sum().aggregation_temporality() == pb::AGGREGATION_TEMPORALITY_CUMULATIVE);
    const auto& p = bytes.sum().data_points(0);
    CHECK(p.as_int() == 5000);
    CHECK(p.start_time_unix_nano() == start_us * 1000);
    CHECK(p.time_unix_nano() == t1);
    CHECK(attributes(p.attributes()) == std::map<std::string, std::string>{{"peer", "decode-0"}});

    const auto& mem = metric(r, "xtel_memory_registered_bytes");
    REQUIRE(mem.has_gauge());
    CHECK(mem.gauge().data_points(0).as_int() == 1 << 20);
    CHECK(mem.gauge().data_points(0).start_time_unix_nano() == 0);

    const auto& lat = metric(r, "xtel_transfer_duration_seconds");
    CHECK(lat.unit() == "s");
    REQUIRE(lat.has_histogram());
    const auto& h = lat.histogram().data_points(0);
    CHECK(h.count() == 9);
    CHECK(h.sum() == 0.0025);
    CHECK(std::vector<double>(h.explicit_bounds().begin(), h.explicit_bounds().end()) ==
          std::vector<double>{0.0001, 0.001});
    // Not cumulative, and the +Inf bucket last: 9 - 3 - 4.
    CHECK(std::vector<std::uint64_t>(h.bucket_counts().begin(), h.bucket_counts().end()) ==
          std::vector<std::uint64_t>{3, 4, 2});
    REQUIRE(h.exemplars_size() == 2);
    CHECK(h.exemplars(0).trace_id() ==
          std::string("\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e\x47\x36", 16));
    CHECK(h.exemplars(0).as_double() == 0.00009);
    CHECK(h.exemplars(0).time_unix_nano() == 1'700'000'005'000'000'000);
    CHECK(h.exemplars(0).filtered_attributes_size() == 0);
    // A plain request id: the trace its spans are in (derived from it), the id beside it.
    const auto derived = xtel::trace::derive_trace_id("req-17");
    CHECK(h.exemplars(1).trace_id() ==
          std::string(reinterpret_cast<const char*>(derived.data()), derived.size()));
    CHECK(h.exemplars(1).span_id().empty());
    CHECK(attributes(h.exemplars(1).filtered_attributes()) ==
          std::map<std::string, std::string>{{"request_id", "req-17"}});

    const auto& scrape = metric(r, "xtel_exporter_scrape_duration_seconds");
    REQUIRE(scrape.has_summary());
    CHECK(scrape.summary().data_points(0).count() == 2);
    CHECK(scrape.summary().data_points(0).sum() == 0.0015);
}

TEST_CASE("the exporter's own snapshots share one resource of service xtel-exporter", "[otlp]") {
    auto own = std::make_shared<metrics::snapshot>();
    metrics::family_snapshot f;
    f.spec = {"xtel_exporter_agents", "Agents.", metrics::metric_type::gauge, {}};
    f.series = {counter_series({}, 2)};
    own->families = {f};
    auto process = std::make_shared<metrics::snapshot>(*own);
    process->families[0].spec.name = "process_open_fds";
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const auto r = decode(enc.encode(snapshots{agent(1, {0, 0}, 0, 0), own, process}, t1,
                                     push::otlp_encoding::protobuf));
    REQUIRE(r.resource_metrics_size() == 2);
    const auto attrs = attributes(r.resource_metrics(1).resource().attributes());
    CHECK(attrs.at("service.name") == "xtel-exporter");
    CHECK(attrs.at("process.pid") == "int:" + std::to_string(::getpid()));
    CHECK(r.resource_metrics(1).scope_metrics(0).metrics_size() == 2);
}

TEST_CASE("delta temporality sends what each series gained since the previous export", "[otlp]") {
    push::otlp_encoder enc(resource(), push::otlp_temporality::delta);
    const auto first = decode(
        enc.encode(snapshots{agent(5000, {3, 4}, 9, 2500)}, t1, push::otlp_encoding::protobuf));
    const auto second = decode(
        enc.encode(snapshots{agent(7500, {4, 6}, 13, 4000)}, t2, push::otlp_encoding::protobuf));

    const auto& b1 = metric(first, "xtel_transfer_bytes_total").sum();
    CHECK(b1.aggregation_temporality() == pb::AGGREGATION_TEMPORALITY_DELTA);
    CHECK(b1.data_points(0).as_int() == 5000);
    CHECK(b1.data_points(0).start_time_unix_nano() == start_us * 1000);
    const auto& b2 = metric(second, "xtel_transfer_bytes_total").sum().data_points(0);
    CHECK(b2.as_int() == 2500);
    CHECK(b2.start_time_unix_nano() == t1);
    CHECK(b2.time_unix_nano() == t2);

    const auto& h2 = metric(second, "xtel_transfer_duration_seconds").histogram().data_points(0);
    CHECK(h2.count() == 4);
    CHECK(h2.sum() == 0.0015);
    CHECK(std::vector<std::uint64_t>(h2.bucket_counts().begin(), h2.bucket_counts().end()) ==
          std::vector<std::uint64_t>{1, 2, 1});
    // Only the exemplar recorded after the first export (at t1) comes again.
    REQUIRE(h2.exemplars_size() == 1);
    CHECK(h2.exemplars(0).time_unix_nano() == 1'700'000'015'000'000'000);
    // Gauges stay what they are.
    CHECK(metric(second, "xtel_memory_registered_bytes").gauge().data_points(0).as_int() ==
          1 << 20);
    CHECK(enc.tracked_series() == 2);
}

TEST_CASE("delta temporality starts afresh when the agent restarted or went away", "[otlp]") {
    push::otlp_encoder enc(resource(), push::otlp_temporality::delta);
    enc.encode(snapshots{agent(5000, {3, 4}, 9, 2500)}, t1, push::otlp_encoding::protobuf);
    // Restarted under its name: another start time, lower values.
    constexpr std::uint64_t restarted_us = start_us + 9'000'000;
    const auto r = decode(enc.encode(snapshots{agent(700, {1, 0}, 1, 50, restarted_us)}, t2,
                                     push::otlp_encoding::protobuf));
    const auto& p = metric(r, "xtel_transfer_bytes_total").sum().data_points(0);
    CHECK(p.as_int() == 700);
    CHECK(p.start_time_unix_nano() == restarted_us * 1000);
    CHECK(metric(r, "xtel_transfer_duration_seconds").histogram().data_points(0).count() == 1);

    enc.encode(snapshots{}, t2 + 1, push::otlp_encoding::protobuf);
    CHECK(enc.tracked_series() == 0);
}

TEST_CASE("OTLP JSON writes 64-bit integers as strings, enums as numbers and ids in hex",
          "[otlp]") {
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const std::string json =
        enc.encode(snapshots{agent(5000, {3, 4}, 9, 2500)}, t1, push::otlp_encoding::json);
    CHECK(json.starts_with(
        R"({"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"inference"}})"));
    CHECK(xtel_test::count_of(json, R"("asInt":"5000")") == 1);
    CHECK(xtel_test::count_of(json, R"({"key":"process.pid","value":{"intValue":"4242"}})") == 1);
    CHECK(xtel_test::count_of(json, R"("timeUnixNano":"1700000010000000000")") == 4);
    CHECK(xtel_test::count_of(json, R"("startTimeUnixNano":"1700000000000000000")") == 3);
    CHECK(xtel_test::count_of(json, R"("aggregationTemporality":2,"isMonotonic":true)") == 1);
    CHECK(xtel_test::count_of(
              json, R"("bucketCounts":["3","4","2"],"explicitBounds":[0.0001,0.001])") == 1);
    CHECK(xtel_test::count_of(json, R"("traceId":"4bf92f3577b34da6a3ce929d0e0e4736")") == 1);
    CHECK(xtel_test::count_of(json, R"("count":"9","sum":0.0025)") == 1);
}

TEST_CASE("a W3C traceparent exemplar gives its trace and span", "[otlp]") {
    auto s = agent(1, {1, 0}, 1, 10);
    s->families[2].series[0].exemplars = {
        {"request_id", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", 10, start_us + 1},
        {},
        {},
    };
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const auto r = decode(enc.encode(snapshots{s}, t1, push::otlp_encoding::protobuf));
    const auto& x =
        metric(r, "xtel_transfer_duration_seconds").histogram().data_points(0).exemplars(0);
    CHECK(x.span_id() == std::string("\xb7\xad\x6b\x71\x69\x20\x33\x31", 8));
    CHECK(x.trace_id().size() == 16);
}

TEST_CASE("an OTLP histogram's bounds are the numbers a scrape's le labels show", "[otlp]") {
    auto s = agent(1, {0, 0, 0, 0, 0}, 0, 0);
    // -0, whole bounds scaled, a fraction, and one past where whole bounds are shown exactly.
    s->families[2].spec.bounds = {-0.0, 1, 25, 1234567.5, 3e15};
    s->families[2].series[0].exemplars.clear();
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const auto r = decode(enc.encode(snapshots{s}, t1, push::otlp_encoding::protobuf));
    const auto& got =
        metric(r, "xtel_transfer_duration_seconds").histogram().data_points(0).explicit_bounds();
    REQUIRE(got.size() == 5);
    for (int i = 0; i < got.size(); ++i) {
        const std::string le =
            metrics::format_bound(s->families[2].spec.bounds[static_cast<std::size_t>(i)], 6);
        INFO("bound " << i << ", le=\"" << le << '"');
        CHECK(got[i] == std::stod(le));
        CHECK(std::signbit(got[i]) == std::signbit(std::stod(le)));
    }
    CHECK(got[1] == 0.000001);
    CHECK(got[4] == 3e9);
}

namespace {

push::otlp_options settings(std::map<std::string, std::string> vars, push::otlp_flags flags = {}) {
    const auto o = push::otlp_options_from(xtel_test::env_table(std::move(vars)), flags, "host-a");
    REQUIRE(o);
    return *o;
}

std::string error_of(std::map<std::string, std::string> vars, push::otlp_flags flags = {}) {
    try {
        push::otlp_options_from(xtel_test::env_table(std::move(vars)), flags, "host-a");
    } catch (const config_error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("OTLP is off unless an endpoint is set", "[otlp]") {
    CHECK_FALSE(push::otlp_options_from(xtel_test::env_table({}), {}, "h"));
    CHECK_FALSE(push::otlp_options_from(
        xtel_test::env_table(
            {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, {"OTEL_METRICS_EXPORTER", "none"}}),
        {}, "h"));
}

TEST_CASE("the OTLP endpoint variables and flag give the URL as the specification says", "[otlp]") {
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"}}).url ==
          "http://c:4318/v1/metrics");
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/base"}}).url ==
          "http://c:4318/base/v1/metrics");
    // The path goes at the end of the URL's path, not after its query.
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/base/?tenant=a#x"}}).url ==
          "http://c:4318/base/v1/metrics?tenant=a#x");
    // The signal's own endpoint is used as it is, and wins.
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                    {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://m:1/custom"}})
              .url == "https://m:1/custom");
    push::otlp_flags f;
    f.endpoint = "http://flag:9";
    CHECK(settings({{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://m:1/custom"}}, f).url ==
          "http://flag:9/v1/metrics");
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}}) ==
          "OTEL_EXPORTER_OTLP_ENDPOINT='collector:4318' is invalid: expected an http:// or "
          "https:// URL with a host, without spaces or control bytes (for example "
          "http://collector:4318); it does not start with http:// or https://");
    // Found by fuzz_otlp: without a host the path would have eaten into the scheme.
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://"}})
              .starts_with("OTEL_EXPORTER_OTLP_ENDPOINT='http://' is invalid"));
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https:///v1/metrics"}})
              .starts_with("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT='https:///v1/metrics' is invalid"));
}

TEST_CASE("the OTLP settings read every variable, and flags override them", "[otlp]") {
    const auto o = settings(
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
         {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
         {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b%2Cc , x-tenant=7"},
         {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"},
         {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
         {"OTEL_METRIC_EXPORT_INTERVAL", "1500"},
         {"OTEL_RESOURCE_ATTRIBUTES", "service.name=fromattrs,k8s.pod.name=p%3D1,host.name=node-9"},
         {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta"}});
    CHECK(o.encoding == push::otlp_encoding::json);
    CHECK(o.headers == std::vector<std::pair<std::string, std::string>>{{"api-key", "a b,c"},
                                                                        {"x-tenant", "7"}});
    CHECK(o.timeout == 2500ms);
    CHECK(o.gzip);
    CHECK(o.interval == 1500ms);
    CHECK(o.temporality == push::otlp_temporality::delta);
    CHECK(o.resource.service_name == "fromattrs");
    CHECK(o.resource.host_name == "node-9");
    CHECK(o.resource.attributes == std::vector<metrics::label>{{"k8s.pod.name", "p=1"}});

    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"},
                    {"OTEL_SERVICE_NAME", "svc"},
                    {"OTEL_RESOURCE_ATTRIBUTES", "service.name=other"}})
              .resource.service_name == "svc");
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"}}).resource.host_name == "host-a");
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"},
                    {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                    {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf"}})
              .encoding == push::otlp_encoding::protobuf);

    push::otlp_flags f;
    f.protocol = "http/protobuf";
    f.temporality = "cumulative";
    f.compression = "none";
    f.interval_s = "2";
    f.headers = {"x-tenant=8"};
    const auto flagged = settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                   {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                                   {"OTEL_EXPORTER_OTLP_HEADERS", "X-Tenant=7,a=b"},
                                   {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                                   {"OTEL_METRIC_EXPORT_INTERVAL", "1500"},
                                   {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta"}},
                                  f);
    CHECK(flagged.encoding == push::otlp_encoding::protobuf);
    CHECK(flagged.temporality == push::otlp_temporality::cumulative);
    CHECK_FALSE(flagged.gzip);
    CHECK(flagged.interval == 2s);
    CHECK(flagged.headers ==
          std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"x-tenant", "8"}});
}

TEST_CASE("a malformed OTLP setting names the variable or flag, the value and what is accepted",
          "[otlp]") {
    const std::map<std::string, std::string> on{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"}};
    const auto with = [&](std::string var, std::string value) {
        auto vars = on;
        vars[var] = value;
        return error_of(vars);
    };
    CHECK(with("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc") ==
          "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL='grpc' is invalid: expected http/protobuf or "
          "http/json (grpc is not supported: collectors take OTLP/HTTP on port 4318)");
    CHECK(with("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd") ==
          "OTEL_EXPORTER_OTLP_COMPRESSION='zstd' is invalid: expected gzip or none");
    CHECK(with("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes") ==
          "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE='sometimes' is invalid: expected "
          "cumulative, delta or lowmemory");
    CHECK(with("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")
              .starts_with("OTEL_EXPORTER_OTLP_TIMEOUT='10s' is invalid"));
    CHECK(with("OTEL_METRIC_EXPORT_INTERVAL", "5")
              .starts_with("OTEL_METRIC_EXPORT_INTERVAL='5' is invalid"));
    CHECK(with("OTEL_EXPORTER_OTLP_HEADERS", "a=%zz") ==
          "OTEL_EXPORTER_OTLP_HEADERS='a=%zz' is invalid: expected key=value pairs separated by "
          "commas, values percent-encoded; 'a=%zz' has a bad %-escape");
    CHECK(with("OTEL_EXPORTER_OTLP_HEADERS", "a b=c") ==
          "OTEL_EXPORTER_OTLP_HEADERS='a b=c' is invalid: the header name 'a b' is not one: "
          "expected letters, digits and !#$%&'*+-.^_`|~");
    CHECK(with("OTEL_RESOURCE_ATTRIBUTES", "=x").find("an empty key") != std::string::npos);
    push::otlp_flags f;
    f.protocol = "json";
    CHECK(error_of(on, f) ==
          "--otlp-protocol='json' is invalid: expected http/protobuf or "
          "http/json");
}

TEST_CASE("a push URL that curl would refuse at every try is refused at start in one line",
          "[otlp]") {
    const auto refused = [](std::string_view url) {
        try {
            push::check_push_url("--remote-write", url, "http://p:9090/api/v1/write");
        } catch (const config_error& e) {
            const std::string what = e.what();
            CHECK(what.find_first_of("\r\n") == std::string::npos);
            return what;
        }
        return std::string("accepted");
    };
    const std::string accepted =
        "expected an http:// or https:// URL with a host, without spaces or control bytes (for "
        "example http://p:9090/api/v1/write); ";
    CHECK(refused("http://") ==
          "--remote-write='http://' is invalid: " + accepted + "it has no host");
    CHECK(refused("http://127.0.0.1:1 x") ==
          "--remote-write='http://127.0.0.1:1 x' is invalid: " + accepted + "byte 18 is a space");
    CHECK(refused("http://h/\r\nX: 1") == "--remote-write='http://h/\\r\\nX: 1' is invalid: " +
                                              accepted + "byte 9 is a control byte");
    CHECK(refused("ftp://h/") == "--remote-write='ftp://h/' is invalid: " + accepted +
                                     "it does not start with http:// or https://");
    for (const std::string_view bad :
         {"", "h:9090", "http:/h", "https:///v1", "http://user@/x", "http://:9090/x", "http://[]:1",
          "http://[::1", "http://h:0/", "http://h:65536", "http://h:/x", "http://h:x1", "http://\t",
          "HTTP://h", "htTp://h"}) {
        INFO(bad);
        CHECK(refused(bad).starts_with("--remote-write='"));
        CHECK(refused(bad) != "accepted");
    }
    for (const std::string_view good :
         {"http://h", "https://h:443/api/v1/write?x=1", "http://u:p@h:1/", "http://[::1]:4318",
          "http://h:65535#f"}) {
        INFO(good);
        CHECK(refused(good) == "accepted");
    }
}

TEST_CASE("every OTLP endpoint variable or flag is checked as a push URL", "[otlp]") {
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1 x"}}) ==
          "OTEL_EXPORTER_OTLP_ENDPOINT='http://127.0.0.1:1 x' is invalid: expected an http:// or "
          "https:// URL with a host, without spaces or control bytes (for example "
          "http://collector:4318); byte 18 is a space");
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://c:4318/v1\r/metrics"}})
              .starts_with("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT='http://c:4318/v1\\r/metrics' is "
                           "invalid"));
    push::otlp_flags f;
    f.endpoint = "http://:4318";
    CHECK(error_of({}, f).starts_with("--otlp-endpoint='http://:4318' is invalid"));
    CHECK(error_of({}, f).ends_with("it has no host"));
}

TEST_CASE("a header value with CR or LF is blamed rather than its name and shown escaped",
          "[otlp]") {
    push::otlp_flags f;
    f.endpoint = "http://c";
    f.headers = {"a=b\r\nX-Evil: 1"};
    CHECK(error_of({}, f) ==
          "--otlp-header='a=b\\r\\nX-Evil: 1' is invalid: the value of header 'a' "
          "('b\\r\\nX-Evil: 1') holds CR, LF or NUL: expected a value without line breaks");
    // The variable's values are percent-decoded first: the decoded value is the one shown.
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"},
                    {"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "a=b%0D%0AX-Evil: 1"}}) ==
          "OTEL_EXPORTER_OTLP_METRICS_HEADERS='a=b%0D%0AX-Evil: 1' is invalid: the value of header "
          "'a' ('b\\r\\nX-Evil: 1') holds CR, LF or NUL: expected a value without line breaks");
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"},
                    {"OTEL_EXPORTER_OTLP_HEADERS", "k=%00"}})
              .ends_with("the value of header 'k' ('\\x00') holds CR, LF or NUL: expected a value "
                         "without line breaks"));
}

TEST_CASE("Retry-After is read as seconds or as an HTTP date", "[otlp]") {
    CHECK(push::parse_retry_after("3", 0) == 3s);
    CHECK(push::parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", 1445412480) == 30s);
    CHECK(push::parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490) == 0s);
    CHECK_FALSE(push::parse_retry_after("soon", 0));
    CHECK_FALSE(push::parse_retry_after("", 0));
    CHECK_FALSE(push::parse_retry_after("-1", 0));
}

TEST_CASE("an OTLP partial success is read from either encoding", "[otlp]") {
    pb::ExportMetricsServiceResponse r;
    r.mutable_partial_success()->set_rejected_data_points(3);
    r.mutable_partial_success()->set_error_message("too old");
    const auto p = push::parse_otlp_response(r.SerializeAsString(), "application/x-protobuf");
    REQUIRE(p);
    CHECK(p->rejected_data_points == 3);
    CHECK(p->error_message == "too old");
    const auto j = push::parse_otlp_response(
        R"({"partialSuccess": {"rejectedDataPoints": "12", "errorMessage": "bad \"unit\""}})",
        "application/json; charset=utf-8");
    REQUIRE(j);
    CHECK(j->rejected_data_points == 12);
    CHECK(j->error_message == R"(bad \"unit\")");
    // The receiver's message goes into a log line: cut, without line breaks (found by
    // fuzz_otlp).
    r.mutable_partial_success()->set_error_message("forged\nxtel: error: " +
                                                   std::string(2000, 'x'));
    const auto long_one =
        push::parse_otlp_response(r.SerializeAsString(), "application/x-protobuf");
    REQUIRE(long_one);
    CHECK(long_one->error_message.size() == 512);
    CHECK(long_one->error_message.starts_with("forged?xtel: error: xxx"));
    CHECK_FALSE(push::parse_otlp_response("", "application/x-protobuf"));
    CHECK_FALSE(push::parse_otlp_response("{}", "application/json"));
    CHECK_FALSE(push::parse_otlp_response("\xff\xff", "application/x-protobuf"));
}

TEST_CASE("an OTLP export is retried on 503 after the Retry-After the receiver asked for",
          "[otlp][concurrency]") {
    xtel_test::fake_receiver receiver(
        "/v1/metrics", std::vector<xtel_test::fake_answer>{
                           {503, "busy", "text/plain", {{"Retry-After", "1"}}}, {200}});
    push::otlp_options o;
    o.url = receiver.url();
    o.headers = {{"x-tenant", "7"}};
    push::otlp_pusher e(o);
    e.push(snapshots{agent(1, {0, 0}, 0, 0)}, t1);
    REQUIRE(eventually([&] { return e.sender().sent() == 1; }));
    CHECK(e.sender().failed_attempts() == 1);
    const std::lock_guard lock(receiver.mutex);
    REQUIRE(receiver.requests.size() == 2);
    CHECK(receiver.times[1] - receiver.times[0] >= 950ms);
    CHECK(receiver.requests[1].get_header_value("Content-Type") == "application/x-protobuf");
    CHECK(receiver.requests[1].get_header_value("x-tenant") == "7");
    CHECK(decode(receiver.requests[1].body).resource_metrics_size() == 1);
}

TEST_CASE("an OTLP export the receiver refuses is dropped, a partial success counted", "[otlp]") {
    pb::ExportMetricsServiceResponse partial;
    partial.mutable_partial_success()->set_rejected_data_points(2);
    xtel_test::fake_receiver receiver(
        "/v1/metrics",
        std::vector<xtel_test::fake_answer>{
            {500}, {400}, {200, partial.SerializeAsString(), "application/x-protobuf", {}}});
    push::otlp_options o;
    o.url = receiver.url();
    o.gzip = true;
    push::otlp_pusher e(o);
    for (int i = 0; i < 3; ++i) {
        e.push(snapshots{agent(1, {0, 0}, 0, 0)}, t1 + i);
    }
    REQUIRE(eventually([&] { return e.sender().sent() == 1; }));
    // 500 is not one of OTLP's retryable answers (429, 502, 503, 504).
    CHECK(e.sender().rejected() == 2);
    CHECK(e.sender().failed_attempts() == 0);
    CHECK(e.rejected_points() == 2);
    const std::lock_guard lock(receiver.mutex);
    CHECK(receiver.requests[2].get_header_value("Content-Encoding") == "gzip");
}

namespace {

const pb::ExponentialHistogramDataPoint& exponential_point(const pb::ExportMetricsServiceRequest& r,
                                                           std::string_view name) {
    const auto& m = metric(r, name);
    REQUIRE(m.has_exponential_histogram());
    REQUIRE(m.exponential_histogram().data_points_size() == 1);
    return m.exponential_histogram().data_points(0);
}

std::vector<std::uint64_t> counts_of(const pb::ExponentialHistogramDataPoint::Buckets& b) {
    return {b.bucket_counts().begin(), b.bucket_counts().end()};
}

/// `n` empty buckets with `at` (index: count) set.
std::vector<std::uint64_t> dense(std::size_t n, std::map<std::size_t, std::uint64_t> at) {
    std::vector<std::uint64_t> out(n, 0);
    for (const auto& [i, c] : at) {
        out[i] = c;
    }
    return out;
}

constexpr std::string_view native_name = "xtel_native_latency_seconds";

}  // namespace

TEST_CASE("a native histogram is an exponential histogram point, its buckets one index lower",
          "[otlp]") {
    auto store = xtel_test::native_store(native_name);
    const auto id = *store.id_of(native_name);
    store.observe(store.series_of(id, {"write"}), 1000,
                  {.label_name = "request_id",
                   .label_value = "req-9",
                   .timestamp_us = 1'700'000'005'000'000});
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const auto r = decode(enc.encode(snapshots{xtel_test::native_snapshot(store, start_us)}, t1,
                                     push::otlp_encoding::protobuf));
    const auto& m = metric(r, native_name);
    CHECK(m.unit() == "s");
    CHECK(m.exponential_histogram().aggregation_temporality() ==
          pb::AGGREGATION_TEMPORALITY_CUMULATIVE);
    const auto& p = exponential_point(r, native_name);
    CHECK(attributes(p.attributes()) == std::map<std::string, std::string>{{"op", "write"}});
    CHECK(p.start_time_unix_nano() == start_us * 1000);
    CHECK(p.time_unix_nano() == t1);
    CHECK(p.count() == 7);
    CHECK(p.sum() == 3.00391);
    CHECK(p.scale() == 3);
    CHECK(p.zero_count() == 1);
    CHECK(p.zero_threshold() == std::ldexp(1.0, -128));
    // Prometheus's buckets -88 (2), -79 (3) and 13 (1) are OTLP's -89, -80 and 12: dense from
    // offset -89, 102 wide.
    CHECK(p.positive().offset() == -89);
    CHECK(counts_of(p.positive()) == dense(102, {{0, 2}, {9, 3}, {101, 1}}));
    CHECK(!p.has_negative());
    REQUIRE(p.exemplars_size() == 1);
    CHECK(p.exemplars(0).as_double() == 0.001);
    CHECK(attributes(p.exemplars(0).filtered_attributes()) ==
          std::map<std::string, std::string>{{"request_id", "req-9"}});
}

TEST_CASE("a histogram kept in both forms is sent as its exponential histogram alone", "[otlp]") {
    const auto store = xtel_test::native_store(native_name, {500, 2000});
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const auto r = decode(enc.encode(snapshots{xtel_test::native_snapshot(store, start_us)}, t1,
                                     push::otlp_encoding::protobuf));
    const auto& all = r.resource_metrics(0).scope_metrics(0).metrics();
    REQUIRE(all.size() == 1);
    CHECK(!all[0].has_histogram());
    const auto& p = exponential_point(r, native_name);
    CHECK(p.count() == 6);
    CHECK(p.sum() == 3.00291);
    CHECK(p.zero_count() == 1);
    CHECK(p.positive().offset() == -89);
    CHECK(counts_of(p.positive()) == dense(102, {{0, 2}, {9, 2}, {101, 1}}));
}

TEST_CASE("a delta exponential point subtracts the previous buckets brought to its lower scale",
          "[otlp]") {
    // 450 µs and 1 ms: buckets -88 and -79 at schema 3.
    const std::uint64_t first_values[] = {450, 1000};
    auto store = xtel_test::native_store(native_name, {}, first_values);
    push::otlp_encoder enc(resource(), push::otlp_temporality::delta);
    const auto r1 = decode(enc.encode(snapshots{xtel_test::native_snapshot(store, start_us)}, t1,
                                      push::otlp_encoding::protobuf));
    const auto& p1 = exponential_point(r1, native_name);
    CHECK(p1.scale() == 3);
    CHECK(p1.positive().offset() == -89);
    CHECK(counts_of(p1.positive()) == dense(10, {{0, 1}, {9, 1}}));

    // 2 s (bucket 8) then 1 µs (bucket -159: 168 wide) halve the series' resolution: schema 2,
    // where the earlier buckets are -44 and -39 and the new ones 4 and -79.
    const auto id = *store.id_of(native_name);
    store.observe(id, {"write"}, 2'000'000);
    store.observe(id, {"write"}, 1);
    REQUIRE(store.find_series(native_name, {"write"})->native_schema == 2);
    const auto r2 = decode(enc.encode(snapshots{xtel_test::native_snapshot(store, start_us)}, t2,
                                      push::otlp_encoding::protobuf));
    const auto& p2 = exponential_point(r2, native_name);
    CHECK(p2.start_time_unix_nano() == t1);
    CHECK(p2.scale() == 2);
    CHECK(p2.count() == 2);
    CHECK(p2.sum() == 2.000001);
    CHECK(p2.zero_count() == 0);
    // Only what is new: OTLP buckets -80 (Prometheus -79) and 3 (4), nothing between.
    CHECK(p2.positive().offset() == -80);
    CHECK(counts_of(p2.positive()) == dense(84, {{0, 1}, {83, 1}}));
}

TEST_CASE("a delta exponential point starts afresh when a native bucket went down", "[otlp]") {
    // The count and the sum grow, but bucket -88 loses its observation: another producer
    // under the same name and start, whose values are whole.
    const std::uint64_t before[] = {450, 1000};
    const std::uint64_t after[] = {1000, 1000, 1000};
    push::otlp_encoder enc(resource(), push::otlp_temporality::delta);
    enc.encode(snapshots{xtel_test::native_snapshot(
                   xtel_test::native_store(native_name, {}, before), start_us)},
               t1, push::otlp_encoding::protobuf);
    const auto r =
        decode(enc.encode(snapshots{xtel_test::native_snapshot(
                              xtel_test::native_store(native_name, {}, after), start_us)},
                          t2, push::otlp_encoding::protobuf));
    const auto& p = exponential_point(r, native_name);
    CHECK(p.start_time_unix_nano() == start_us * 1000);
    CHECK(p.count() == 3);
    CHECK(p.sum() == 0.003);
    CHECK(p.positive().offset() == -80);
    CHECK(counts_of(p.positive()) == std::vector<std::uint64_t>{3});
}

TEST_CASE("OTLP JSON writes an exponential histogram by the proto3 JSON rules", "[otlp]") {
    const std::uint64_t values[] = {0, 450, 460, 3'000'000};
    const auto store = xtel_test::native_store(native_name, {}, values, 0);
    push::otlp_encoder enc(resource(), push::otlp_temporality::cumulative);
    const std::string json = enc.encode(snapshots{xtel_test::native_snapshot(store, start_us)}, t1,
                                        push::otlp_encoding::json);
    // Schema 0: 0.00045 and 0.00046 in bucket -11 (2^-12, 2^-11], 3 in bucket 2; OTLP's -12
    // and 1.
    CHECK(
        xtel_test::count_of(
            json,
            R"("count":"4","sum":3.00091,"scale":0,"zeroCount":"1",)"
            R"("positive":{"offset":-12,"bucketCounts":["2","0","0","0","0","0","0","0","0","0","0","0","0","1"]},)"
            R"("zeroThreshold":2.938735877055719e-39}],"aggregationTemporality":2})") == 1);
    CHECK(xtel_test::count_of(json, R"("exponentialHistogram":{"dataPoints":[{"attributes":)") ==
          1);
}

}  // namespace otlp_test
