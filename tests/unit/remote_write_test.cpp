// The remote-write client: requests decoded back with the messages of proto/ and snappy, and
// the sender's behaviour against a local HTTP server that answers as told.

#include <httplib.h>
#include <snappy.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_receiver.hpp"
#include "native_snapshot.hpp"
#include "prometheus_remote_write.pb.h"
#include "xtel/push/remote_write.hpp"

namespace remote_write_test {

using namespace xtel;
using namespace std::chrono_literals;

namespace {

using label_set = std::vector<std::pair<std::string, std::string>>;

struct decoded_series {
    label_set labels;
    double value = 0;
    std::int64_t timestamp = 0;
};

std::vector<decoded_series> decode(const std::string& body) {
    std::string serialized;
    REQUIRE(snappy::Uncompress(body.data(), body.size(), &serialized));
    xtel::prompb::WriteRequest request;
    REQUIRE(request.ParseFromString(serialized));
    std::vector<decoded_series> out;
    for (const auto& ts : request.timeseries()) {
        decoded_series d;
        for (const auto& l : ts.labels()) {
            d.labels.emplace_back(l.name(), l.value());
        }
        REQUIRE(ts.samples_size() == 1);
        d.value = ts.samples(0).value();
        d.timestamp = ts.samples(0).timestamp();
        out.push_back(std::move(d));
    }
    return out;
}

metrics::series series_of(std::vector<std::string> label_values, std::uint64_t value) {
    metrics::series s;
    s.label_values = std::move(label_values);
    s.value = value;
    return s;
}

/// An agent's snapshot: a counter with labels, a gauge kept in microseconds (decimals 6), and a
/// histogram kept in milliseconds (decimals 3) with 3 bounds.
std::shared_ptr<const metrics::snapshot> small_snapshot() {
    auto snap = std::make_shared<metrics::snapshot>();
    snap->labels = {{"agent_name", "a"}};
    metrics::family_snapshot counter;
    counter.spec = {"xfer_bytes_total", "Bytes.", metrics::metric_type::counter, {"peer", "op"}};
    counter.series = {series_of({"p1", "write"}, 42)};
    metrics::family_snapshot gauge;
    gauge.spec = {"queue_wait_seconds", "Wait.", metrics::metric_type::gauge, {}, 6};
    gauge.series = {series_of({}, 450)};
    metrics::family_snapshot histogram;
    histogram.spec = {"latency_seconds", "Latency.", metrics::metric_type::histogram, {"op"}, 3,
                      {1, 10, 100}};
    metrics::series h = series_of({"read"}, 0);
    h.buckets = {1, 2, 3};  // one per bound, not cumulative; one more above every bound
    h.count = 7;
    h.sum = 12345;
    histogram.series = {h};
    snap->families = {histogram, gauge, counter};
    return snap;
}

}  // namespace

TEST_CASE("a write request holds every series with sorted labels and values as scraped",
          "[remote_write]") {
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{small_snapshot()};
    const auto series = decode(push::encode_write_request(snaps, 1'700'000'000'123));
    REQUIRE(series.size() == 8);
    for (const auto& s : series) {
        CHECK(s.timestamp == 1'700'000'000'123);
        CHECK(std::is_sorted(s.labels.begin(), s.labels.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; }));
    }
    const auto bucket = [](std::string le) {
        return label_set{{"__name__", "latency_seconds_bucket"},
                         {"agent_name", "a"},
                         {"le", std::move(le)},
                         {"op", "read"}};
    };
    // Bounds 1, 10, 100 ms shown in seconds, as the text exposition writes them; cumulative.
    CHECK(series[0].labels == bucket("0.001"));
    CHECK(series[0].value == 1);
    CHECK(series[1].labels == bucket("0.01"));
    CHECK(series[1].value == 3);
    CHECK(series[2].labels == bucket("0.1"));
    CHECK(series[2].value == 6);
    CHECK(series[3].labels == bucket("+Inf"));
    CHECK(series[3].value == 7);
    CHECK(series[4].labels ==
          label_set{{"__name__", "latency_seconds_sum"}, {"agent_name", "a"}, {"op", "read"}});
    CHECK(series[4].value == 12.345);
    CHECK(series[5].labels ==
          label_set{{"__name__", "latency_seconds_count"}, {"agent_name", "a"}, {"op", "read"}});
    CHECK(series[5].value == 7);
    CHECK(series[6].labels == label_set{{"__name__", "queue_wait_seconds"}, {"agent_name", "a"}});
    CHECK(series[6].value == 0.00045);
    CHECK(series[7].labels == label_set{{"__name__", "xfer_bytes_total"},
                                        {"agent_name", "a"},
                                        {"op", "write"},
                                        {"peer", "p1"}});
    CHECK(series[7].value == 42);
}

TEST_CASE("external labels join every series in sorted place and a series' own label wins",
          "[remote_write]") {
    auto snap = std::make_shared<metrics::snapshot>(*small_snapshot());
    snap->families[2].series.push_back(series_of({"p2", "read"}, 5));
    snap->families[2].spec.label_names = {"peer", "instance"};  // a label the push also adds
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{snap};
    const std::vector<metrics::label> external{{"instance", "node-7:9465"}, {"zone", "b"}};
    const auto series = decode(push::encode_write_request(snaps, 1, external));
    REQUIRE(series.size() == 9);
    CHECK(series[0].labels == label_set{{"__name__", "latency_seconds_bucket"},
                                        {"agent_name", "a"},
                                        {"instance", "node-7:9465"},
                                        {"le", "0.001"},
                                        {"op", "read"},
                                        {"zone", "b"}});
    CHECK(series[6].labels == label_set{{"__name__", "queue_wait_seconds"},
                                        {"agent_name", "a"},
                                        {"instance", "node-7:9465"},
                                        {"zone", "b"}});
    // The family's own instance label: kept, not replaced and not doubled.
    CHECK(series[7].labels == label_set{{"__name__", "xfer_bytes_total"},
                                        {"agent_name", "a"},
                                        {"instance", "write"},
                                        {"peer", "p1"},
                                        {"zone", "b"}});
    CHECK(series[8].labels == label_set{{"__name__", "xfer_bytes_total"},
                                        {"agent_name", "a"},
                                        {"instance", "read"},
                                        {"peer", "p2"},
                                        {"zone", "b"}});
}

TEST_CASE("a family an earlier snapshot gave another type is left out, as a scrape leaves it",
          "[remote_write]") {
    auto other = std::make_shared<metrics::snapshot>();
    other->labels = {{"agent_name", "b"}};
    metrics::family_snapshot gauge;
    gauge.spec = {"xfer_bytes_total", "Bytes.", metrics::metric_type::gauge, {"peer", "op"}};
    gauge.series = {series_of({"p1", "write"}, 1)};
    other->families = {gauge};
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{small_snapshot(), other};
    const auto series = decode(push::encode_write_request(snaps, 1));
    CHECK(series.size() == 8);
    for (const auto& s : series) {
        CHECK(s.labels[1] == std::pair<std::string, std::string>{"agent_name", "a"});
    }
}

namespace {

xtel::prompb::WriteRequest decode_request(const std::string& body) {
    std::string serialized;
    REQUIRE(snappy::Uncompress(body.data(), body.size(), &serialized));
    xtel::prompb::WriteRequest request;
    REQUIRE(request.ParseFromString(serialized));
    return request;
}

label_set labels_of(const xtel::prompb::TimeSeries& ts) {
    label_set out;
    for (const auto& l : ts.labels()) {
        out.emplace_back(l.name(), l.value());
    }
    return out;
}

}  // namespace

TEST_CASE("a native histogram is one series with one remote-write histogram, every field set",
          "[remote_write]") {
    const auto store = xtel_test::native_store("xtel_rw_latency_seconds");
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store)};
    const auto request = decode_request(push::encode_write_request(snaps, 1'700'000'000'123));
    // Native only: no _bucket, _sum or _count series, as Prometheus stores a native scrape.
    REQUIRE(request.timeseries_size() == 1);
    const auto& ts = request.timeseries(0);
    CHECK(labels_of(ts) ==
          label_set{{"__name__", "xtel_rw_latency_seconds"}, {"agent_name", "a"}, {"op", "write"}});
    CHECK(ts.samples_size() == 0);
    REQUIRE(ts.histograms_size() == 1);
    const auto& h = ts.histograms(0);
    CHECK(h.count_case() == xtel::prompb::Histogram::kCountInt);
    CHECK(h.count_int() == 6);
    CHECK(h.sum() == 3.00291);
    CHECK(h.schema() == 3);
    CHECK(h.zero_threshold() == std::ldexp(1.0, -128));
    CHECK(h.zero_count_case() == xtel::prompb::Histogram::kZeroCountInt);
    CHECK(h.zero_count_int() == 1);
    // Buckets -88 (2), -79 (2) and 13 (1): gaps of 8 and 91 empty buckets make three spans.
    REQUIRE(h.positive_spans_size() == 3);
    CHECK(h.positive_spans(0).offset() == -88);
    CHECK(h.positive_spans(0).length() == 1);
    CHECK(h.positive_spans(1).offset() == 8);
    CHECK(h.positive_spans(1).length() == 1);
    CHECK(h.positive_spans(2).offset() == 91);
    CHECK(h.positive_spans(2).length() == 1);
    CHECK(std::vector<std::int64_t>(h.positive_deltas().begin(), h.positive_deltas().end()) ==
          std::vector<std::int64_t>{2, 0, -1});
    CHECK(h.negative_spans_size() == 0);
    CHECK(h.negative_deltas_size() == 0);
    CHECK(h.negative_counts_size() == 0);
    CHECK(h.positive_counts_size() == 0);
    CHECK(h.reset_hint() == xtel::prompb::Histogram::RESET_HINT_UNKNOWN);
    CHECK(h.timestamp() == 1'700'000'000'123);
}

TEST_CASE("a histogram kept in both forms sends the native series and the classic ones",
          "[remote_write]") {
    // Bounds 500 µs and 2 ms: 0, 450 and 460 at or below the first, the two 1000s below the
    // second, 3 s above both: cumulative 3 and 5, +Inf 6.
    const auto store = xtel_test::native_store("xtel_rw_latency_seconds", {500, 2000});
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store)};
    const auto request = decode_request(push::encode_write_request(snaps, 7));
    REQUIRE(request.timeseries_size() == 6);
    const auto& native = request.timeseries(0);
    CHECK(labels_of(native)[0].second == "xtel_rw_latency_seconds");
    REQUIRE(native.histograms_size() == 1);
    CHECK(native.histograms(0).count_int() == 6);
    CHECK(native.histograms(0).schema() == 3);
    const std::vector<std::pair<std::string, double>> classic{
        {"xtel_rw_latency_seconds_bucket", 3},
        {"xtel_rw_latency_seconds_bucket", 5},
        {"xtel_rw_latency_seconds_bucket", 6},
        {"xtel_rw_latency_seconds_sum", 3.00291},
        {"xtel_rw_latency_seconds_count", 6}};
    for (std::size_t i = 0; i < classic.size(); ++i) {
        const auto& ts = request.timeseries(static_cast<int>(i + 1));
        INFO("series " << i + 1);
        CHECK(labels_of(ts)[0].second == classic[i].first);
        CHECK(ts.histograms_size() == 0);
        REQUIRE(ts.samples_size() == 1);
        CHECK(ts.samples(0).value() == classic[i].second);
    }
    CHECK(labels_of(request.timeseries(1))[2] ==
          std::pair<std::string, std::string>{"le", "0.0005"});
}

TEST_CASE("a native histogram whose schema went down is sent at the schema it is at",
          "[remote_write]") {
    // 1 µs and 2 s are buckets -159 (8 * log2 1e-6 = -159.45) and 8 at schema 3: 168 buckets,
    // more than the 160 a series keeps, so the store halves the resolution to schema 2, where
    // they are buckets -79 and 4.
    const std::uint64_t values[] = {1, 2'000'000};
    const auto store = xtel_test::native_store("xtel_rw_latency_seconds", {}, values);
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store)};
    const auto request = decode_request(push::encode_write_request(snaps, 7));
    REQUIRE(request.timeseries_size() == 1);
    const auto& h = request.timeseries(0).histograms(0);
    CHECK(h.schema() == 2);
    CHECK(h.count_int() == 2);
    CHECK(h.zero_count_int() == 0);
    REQUIRE(h.positive_spans_size() == 2);
    CHECK(h.positive_spans(0).offset() == -79);
    CHECK(h.positive_spans(0).length() == 1);
    CHECK(h.positive_spans(1).offset() == 82);
    CHECK(h.positive_spans(1).length() == 1);
    CHECK(std::vector<std::int64_t>(h.positive_deltas().begin(), h.positive_deltas().end()) ==
          std::vector<std::int64_t>{1, 0});
}

using xtel_test::eventually;

TEST_CASE("a remote writer posts the body with the remote-write headers", "[remote_write]") {
    xtel_test::fake_receiver receiver("/api/v1/write", {204});
    push::remote_writer writer(receiver.url());
    writer.push("body-1");
    REQUIRE(eventually([&] { return writer.sent() == 1; }));
    const std::lock_guard lock(receiver.mutex);
    REQUIRE(receiver.requests.size() == 1);
    const httplib::Request& r = receiver.requests[0];
    CHECK(r.body == "body-1");
    CHECK(r.get_header_value("Content-Encoding") == "snappy");
    CHECK(r.get_header_value("Content-Type") == "application/x-protobuf");
    CHECK(r.get_header_value("X-Prometheus-Remote-Write-Version") == "0.1.0");
    CHECK(r.get_header_value("User-Agent").starts_with("xtel-exporter/"));
}

TEST_CASE("a remote writer retries 5xx and 429 answers, in order, until taken", "[remote_write]") {
    xtel_test::fake_receiver receiver("/api/v1/write", {503, 429, 200});
    push::remote_writer writer(receiver.url());
    writer.push("first");
    writer.push("second");
    REQUIRE(eventually([&] { return writer.sent() == 2; }));
    CHECK(writer.failed_attempts() == 2);
    CHECK(writer.rejected() == 0);
    CHECK(writer.dropped() == 0);
    const std::lock_guard lock(receiver.mutex);
    REQUIRE(receiver.requests.size() == 4);
    CHECK(receiver.requests[0].body == "first");
    CHECK(receiver.requests[1].body == "first");
    CHECK(receiver.requests[2].body == "first");
    CHECK(receiver.requests[3].body == "second");
}

TEST_CASE("a remote writer drops a body the receiver refuses with a 4xx", "[remote_write]") {
    xtel_test::fake_receiver receiver("/api/v1/write", {400, 200});
    push::remote_writer writer(receiver.url());
    writer.push("bad");
    writer.push("good");
    REQUIRE(eventually([&] { return writer.sent() == 1; }));
    CHECK(writer.rejected() == 1);
    CHECK(writer.failed_attempts() == 0);
    CHECK(receiver.received() == 2);
}

TEST_CASE("a remote writer whose queue is full drops the oldest body", "[remote_write]") {
    // Nobody listens on port 1: every attempt fails and the bodies stay queued.
    push::remote_writer writer("http://127.0.0.1:1/api/v1/write", {.queue_capacity = 2});
    writer.push("1");
    writer.push("2");
    writer.push("3");
    CHECK(writer.dropped() == 1);
    CHECK(writer.queued() == 2);
    CHECK(writer.sent() == 0);
}

TEST_CASE("a remote writer stops promptly while the receiver is down", "[remote_write]") {
    const auto start = std::chrono::steady_clock::now();
    {
        push::remote_writer writer("http://127.0.0.1:1/api/v1/write", {.timeout = 2s});
        writer.push("1");
        REQUIRE(eventually([&] { return writer.failed_attempts() >= 2; }));
    }
    CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("a remote writer refuses a URL that is not http", "[remote_write]") {
    CHECK_THROWS_AS(push::remote_writer("ftp://example/x"), push::remote_write_error);
    CHECK_THROWS_AS(push::remote_writer("http://127.0.0.1:1/", {.queue_capacity = 0}),
                    push::remote_write_error);
}

}  // namespace remote_write_test
