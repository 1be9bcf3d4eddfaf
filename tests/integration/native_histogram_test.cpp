// Native histograms end to end: xfer_demo with NIXL_TELEMETRY_HISTOGRAM_KIND=native (or both),
// every transfer timed and the flight recorder on, scraped by a real Prometheus 2.42 started
// with --enable-feature=native-histograms, which asks for the protobuf format. What it stores
// is checked against the transfer times the recorder holds, exactly where the format allows.

#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "agent_support.hpp"
#include "exporter_support.hpp"
#include "prometheus_support.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace native_histogram_test {

using prom_it::first_value;
using prom_it::percent_encode;
using prom_it::prometheus_server;
using xtel_test::temp_dir;

namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t transfers = 400;
constexpr std::uint64_t block = 65536;

bool have_prometheus() {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return false;
    }
    return true;
}

/// xfer_demo moving `transfers` blocks as agent `name`, every transfer timed, its histograms of
/// `kind`, with the flight recorder in `dir` and the Prometheus endpoint on a free port.
prom_it::child_process start_demo(const std::filesystem::path& dir,
                                  const std::string& name,
                                  std::string_view kind) {
    prom_it::spawn_options o;
    o.argv = {XTEL_XFER_DEMO,
              "--op",
              "write",
              "--total",
              std::to_string(transfers * block),
              "--block",
              std::to_string(block),
              "--initiator-name",
              name,
              "--target-name",
              name + "_target",
              "--linger",
              "120"};
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_EXPORTER", "buffer,prometheus"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.string()},
             {"NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "127.0.0.1:0"},
             {"NIXL_TELEMETRY_BUFFER_SIZE", "65536"},
             {"NIXL_TELEMETRY_TIMING_SAMPLE", "1"},
             {"NIXL_TELEMETRY_HISTOGRAM_KIND", std::string(kind)},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"},
             {"UCX_MEM_MALLOC_HOOKS", "no"},
             {"UCX_MEM_EVENTS", "no"},
             {"XTEL_LOG_LEVEL", "info"}};
    return prom_it::child_process(o);
}

/// The transfer times (µs) the flight recorder `file` holds, once it holds all `transfers`.
std::vector<std::uint64_t> recorded_times(const std::filesystem::path& file) {
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    std::vector<std::uint64_t> times;
    while (std::chrono::steady_clock::now() < give_up) {
        times = agent_test::summarize_file(file).values["agent_xfer_time"];
        if (times.size() >= transfers) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    std::sort(times.begin(), times.end());
    return times;
}

/// A PromQL instant query's path.
std::string query(const std::string& promql) {
    return "/api/v1/query?query=" + percent_encode(promql);
}

/// The schema of the first native histogram in a query answer, from its first bucket above
/// the zero bucket: its bounds are base^(i-1) and base^i, base = 2^(2^-schema). nullopt when
/// the answer has no such bucket.
std::optional<int> schema_in(const std::string& json) {
    const auto at = json.find("\"buckets\":[");
    if (at == std::string::npos) {
        return std::nullopt;
    }
    std::size_t b = at;
    while ((b = json.find('[', b + 1)) != std::string::npos) {
        // [boundary_rule,"lower","upper","count"]
        const auto l = json.find('"', b);
        const auto le = json.find('"', l + 1);
        const auto u = json.find('"', le + 1);
        const auto ue = json.find('"', u + 1);
        if (l == std::string::npos || ue == std::string::npos) {
            return std::nullopt;
        }
        const double lower = std::stod(json.substr(l + 1, le - l - 1));
        const double upper = std::stod(json.substr(u + 1, ue - u - 1));
        if (lower > 0) {
            return static_cast<int>(std::lround(-std::log2(std::log2(upper / lower))));
        }
    }
    return std::nullopt;
}

/// What Prometheus 2.42's histogram_quantile(q, h) of a native histogram does
/// (promql/quantile.go, histogramQuantile): rank = q * count; the first bucket, in order, where
/// the running count reaches rank; then linear interpolation between that bucket's bounds. The
/// running counts are whole, so that bucket is the one holding the k-th smallest observation,
/// k = ceil(q * count) (computed as Go computes it, in doubles): the estimate and the exact
/// k-th value lie in the same bucket (base^(i-1), base^i], so the estimate is within a factor
/// of base = 2^(2^-schema) of it.
struct quantile_check {
    double exact = 0;  ///< the k-th smallest observation, in seconds
    double lower = 0;  ///< its bucket's bounds at the schema
    double upper = 0;
};

quantile_check expected_quantile(double q,
                                 const std::vector<std::uint64_t>& sorted_us,
                                 int schema) {
    const double rank = q * static_cast<double>(sorted_us.size());
    const auto k = static_cast<std::size_t>(std::ceil(rank));
    quantile_check c;
    c.exact = static_cast<double>(sorted_us[k - 1]) / 1e6;
    // Bucket i holds (base^(i-1), base^i]: i = ceil(log_base(v)) = ceil(2^schema * log2(v)).
    const double i = std::ceil(std::ldexp(std::log2(c.exact), schema));
    c.lower = std::exp2(std::ldexp(i - 1, -schema));
    c.upper = std::exp2(std::ldexp(i, -schema));
    return c;
}

/// The native histogram checks against one agent's endpoint, for `kind` native or both.
void check_native_agent(std::string_view kind) {
    const temp_dir dir;
    const std::string name = fmt::format("nh_{}", kind);
    auto demo = start_demo(dir.path(), name, kind);
    const auto line = demo.read_line("serving http://", 20s);
    INFO("workload output:\n" << demo.output());
    REQUIRE(line);
    REQUIRE(demo.read_line("lingering for", 60s));
    const auto times = recorded_times(dir.path() / name);
    REQUIRE(times.size() == transfers);

    prometheus_server prom(dir.path() / "prom", prom_it::served_address(*line),
                           {"--enable-feature=native-histograms"});
    const std::string selector =
        fmt::format("xtel_transfer_duration_seconds{{agent_name=\"{}\"}}", name);
    const auto count = prom.poll(
        query(fmt::format("sum(histogram_count({}))", selector)),
        [&](const std::string& body) { return first_value(body) == std::to_string(transfers); });
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    INFO("last answer: " << count);
    // Every timed transfer, each once: the native histogram's count.
    REQUIRE(first_value(count) == std::to_string(transfers));

    // Its sum: the recorder's times, in seconds.
    double sum_us = 0;
    for (const auto t : times) {
        sum_us += static_cast<double>(t);
    }
    const auto sum =
        first_value(prom.poll(query(fmt::format("sum(histogram_sum({}))", selector)),
                              [](const std::string& body) { return !first_value(body).empty(); }));
    REQUIRE_FALSE(sum.empty());
    CHECK(std::stod(sum) == Approx(sum_us / 1e6).epsilon(1e-9));

    const auto series = prom.poll(query(selector), [](const std::string& body) {
        return body.find("\"buckets\":[") != std::string::npos;
    });
    INFO("series: " << series);
    const auto schema = schema_in(series);
    REQUIRE(schema);
    CHECK(*schema == 3);  // NIXL_TELEMETRY_HISTOGRAM_SCHEMA's default, not lowered for these

    const auto p99 =
        first_value(prom.poll(query(fmt::format("histogram_quantile(0.99, sum({}))", selector)),
                              [](const std::string& body) { return !first_value(body).empty(); }));
    REQUIRE_FALSE(p99.empty());
    const double estimate = std::stod(p99);
    const auto c = expected_quantile(0.99, times, *schema);
    INFO("p99: exact " << c.exact << " s, Prometheus " << estimate << " s, bucket (" << c.lower
                       << ", " << c.upper << "]");
    CHECK(c.lower < c.exact);
    CHECK(c.exact <= c.upper * (1 + 1e-12));
    CHECK(estimate >= c.lower * (1 - 1e-12));
    CHECK(estimate <= c.upper * (1 + 1e-12));
    const double base = std::exp2(std::ldexp(1.0, -*schema));
    CHECK(estimate / c.exact <= base * (1 + 1e-12));
    CHECK(c.exact / estimate <= base * (1 + 1e-12));
}

}  // namespace

TEST_CASE(
    "a real Prometheus 2.42 with native histograms stores an agent's native latency "
    "histogram: its count is every timed transfer and its p99 within a bucket of the "
    "recorder's",
    "[http][native_histogram]") {
    if (!have_prometheus()) {
        return;
    }
    check_native_agent("native");
}

TEST_CASE(
    "a real Prometheus 2.42 with native histograms stores the native histogram of an agent "
    "that keeps both kinds",
    "[http][native_histogram]") {
    if (!have_prometheus()) {
        return;
    }
    check_native_agent("both");
}

TEST_CASE("a real Prometheus 2.42 with native histograms still stores a classic agent's buckets",
          "[http][native_histogram]") {
    if (!have_prometheus()) {
        return;
    }
    const temp_dir dir;
    const std::string name = "nh_classic";
    auto demo = start_demo(dir.path(), name, "classic");
    const auto line = demo.read_line("serving http://", 20s);
    INFO("workload output:\n" << demo.output());
    REQUIRE(line);
    REQUIRE(demo.read_line("lingering for", 60s));
    REQUIRE(recorded_times(dir.path() / name).size() == transfers);

    prometheus_server prom(dir.path() / "prom", prom_it::served_address(*line),
                           {"--enable-feature=native-histograms"});
    const auto answer = prom.poll(
        query(fmt::format(
            "sum(xtel_transfer_duration_seconds_bucket{{agent_name=\"{}\",le=\"+Inf\"}})", name)),
        [&](const std::string& body) { return first_value(body) == std::to_string(transfers); });
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    INFO("last answer: " << answer);
    CHECK(first_value(answer) == std::to_string(transfers));
    // Classic buckets, no native histogram of that name.
    const auto native = prom.poll(
        query(fmt::format("histogram_count(xtel_transfer_duration_seconds{{agent_name=\"{}\"}})",
                          name)),
        [](const std::string&) { return true; });
    CHECK(first_value(native).empty());
}

TEST_CASE(
    "a real Prometheus 2.42 with native histograms stores the native histogram "
    "xtel-exporter serves from an agent's node file",
    "[http][native_histogram][exporter]") {
    if (!have_prometheus()) {
        return;
    }
    if (xtel::metrics::snapshot_codec_version < 3) {
        WARN("SKIPPED: the node file's snapshot codec (version "
             << xtel::metrics::snapshot_codec_version
             << ") does not carry native buckets yet; version 3 does");
        return;
    }
    const temp_dir dir;
    const std::string name = "nh_node";
    auto demo = prom_it::child_process(exporter_it::demo_options(
        dir.path(), name, 120,
        {{"NIXL_TELEMETRY_HISTOGRAM_KIND", "native"}, {"NIXL_TELEMETRY_TIMING_SAMPLE", "1"}}, {},
        transfers));
    REQUIRE(demo.read_line("lingering for", 60s));
    auto exporter = exporter_it::start_exporter(dir);
    const auto line = exporter.read_line("serving http://", 20s);
    INFO("xtel-exporter output:\n" << exporter.output());
    REQUIRE(line);
    prometheus_server prom(dir.path() / "prom", prom_it::served_address(*line),
                           {"--enable-feature=native-histograms"});
    const auto answer = prom.poll(
        query(fmt::format(
            "sum(histogram_count(xtel_transfer_duration_seconds{{agent_name=\"{}\"}}))", name)),
        [&](const std::string& body) { return first_value(body) == std::to_string(transfers); });
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    INFO("last answer: " << answer);
    CHECK(first_value(answer) == std::to_string(transfers));
}

TEST_CASE(
    "xtel-exporter answers the accept header of Prometheus 2.42 with native histograms in "
    "protobuf, gzipped when asked",
    "[exporter]") {
    const temp_dir dir;
    auto demo = exporter_it::start_demo(dir, "nh_pb", 120);
    REQUIRE(demo.read_line("lingering for", 60s));
    auto exporter = exporter_it::start_exporter(dir);
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    // Its body holds the agent's byte count once it has read the agent's node file.
    prom_it::scrape_until(port, [](const std::string& s) {
        return s.find("agent_tx_bytes_total{agent_name=\"nh_pb\"") != std::string::npos;
    });
    httplib::Client c("127.0.0.1", port);
    c.set_decompress(false);
    const char* accept =
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
        "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
        "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;"
        "q=0.1";
    const auto plain = c.Get("/metrics", {{"Accept", accept}});
    REQUIRE(plain);
    CHECK(plain->status == 200);
    CHECK(plain->get_header_value("Content-Type") ==
          "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
          "encoding=delimited");
    CHECK(plain->body.find("agent_tx_bytes_total") != std::string::npos);
    CHECK(plain->body.find("# TYPE") == std::string::npos);
    const auto zipped = c.Get("/metrics", {{"Accept", accept}, {"Accept-Encoding", "gzip"}});
    REQUIRE(zipped);
    CHECK(zipped->get_header_value("Content-Encoding") == "gzip");
    CHECK(zipped->get_header_value("Content-Type") == plain->get_header_value("Content-Type"));
}

}  // namespace native_histogram_test
