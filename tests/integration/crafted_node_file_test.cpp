// A faulty or hostile writer in the node directory: crafted node files beside a real xfer_demo
// agent, written with the real node file writer from this process, each with a snapshot that
// would break the node's scrape (labels a series already has, names and units that write lines
// of their own, an infinite bound, one series twice). xtel-exporter refuses each file, logs it
// once and counts it, and keeps serving the real agent; a real Prometheus scraping it keeps the
// target up and stores the agent's exact byte count.

#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prometheus_support.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace crafted_node_file_test {

using prom_it::child_process;
using prom_it::prometheus_server;
using prom_it::scrape;
using prom_it::scrape_until;
using prom_it::served_port;
using prom_it::spawn_options;
using prom_it::value_of;
using xtel::metrics::family_snapshot;
using xtel::metrics::metric_type;
using xtel::metrics::series;
using xtel::metrics::snapshot;
using xtel_test::temp_dir;

namespace {

constexpr std::uint64_t transfers = 50;
constexpr std::uint64_t block = 65536;
const std::string real_agent = "real1";

/// One crafted node file: the agent name it is published under, its snapshot, and a part of
/// the reason the exporter must give for refusing it.
struct crafted {
    std::string agent;
    snapshot snap;
    std::string reason;
};

series value_series(std::vector<std::string> values, std::uint64_t v) {
    series s;
    s.label_values = std::move(values);
    s.value = v;
    return s;
}

snapshot one_family(const std::string& agent, family_snapshot f) {
    snapshot s;
    s.labels = {{"agent_name", agent}};
    s.families = {std::move(f)};
    return s;
}

/// The cases of issue 27: each made the whole node's target go down or served forged lines.
std::vector<crafted> crafted_files(pid_t real_pid) {
    std::vector<crafted> out;
    // A label the exporter adds: "label name \"pid\" is not unique: invalid sample".
    out.push_back({"crafted-pid",
                   one_family("crafted-pid", {{"crafted_info", "h", metric_type::gauge, {"pid"}},
                                              {value_series({std::to_string(real_pid)}, 1)}}),
                   R"(label name 0 "pid" is reserved)"});
    snapshot twice = one_family(
        "crafted-twice", {{"crafted_up", "h", metric_type::gauge, {}}, {value_series({}, 1)}});
    twice.labels.push_back({"agent_name", real_agent});
    out.push_back({"crafted-twice", twice, R"(label 1's name "agent_name" is label 0's too)"});
    out.push_back(
        {"crafted-space",
         one_family("crafted-space", {{"crafted_peers", "h", metric_type::gauge, {"peer name"}},
                                      {value_series({"p"}, 1)}}),
         R"(label name 0 "peer name" is not a label name)"});
    // A name that ends its line and forges a sample of the real agent.
    const std::string forged = fmt::format(
        "crafted_gauge 1\nagent_tx_bytes_total{{agent_name=\"{}\",pid=\"{}\"}} 67108864\nx",
        real_agent, real_pid);
    out.push_back({"crafted-newline",
                   one_family("crafted-newline",
                              {{forged, "h", metric_type::gauge, {}}, {value_series({}, 1)}}),
                   "is not a metric name"});
    out.push_back(
        {"crafted-unit",
         one_family("crafted-unit",
                    {{"crafted_seconds", "h", metric_type::gauge, {}, 0, {}, "seconds\n# EOF"},
                     {value_series({}, 1)}}),
         R"(the unit "seconds\x0a# EOF" is not a unit)"});
    series buckets;
    buckets.buckets = {0, 0};
    out.push_back({"crafted-inf",
                   one_family("crafted-inf", {{"crafted_latency_seconds",
                                               "h",
                                               metric_type::histogram,
                                               {},
                                               6,
                                               {1, std::numeric_limits<double>::infinity()},
                                               "seconds"},
                                              {buckets}}),
                   "bound 1 is inf: expected finite bounds"});
    out.push_back(
        {"crafted-series",
         one_family("crafted-series", {{"crafted_bytes_total", "h", metric_type::counter, {"op"}},
                                       {value_series({"read"}, 1), value_series({"read"}, 2)}}),
         R"(the label values ("read") are series 0's too)"});
    return out;
}

/// The sum of every series of `family` in a text exposition (with a label or without).
std::uint64_t total_of(const std::string& body, std::string_view family) {
    std::uint64_t sum = 0;
    for (std::size_t at = 0; at < body.size();) {
        const auto nl = body.find('\n', at);
        const std::string_view line(body.data() + at,
                                    (nl == std::string::npos ? body.size() : nl) - at);
        if (line.starts_with(family) && line.size() > family.size() &&
            (line[family.size()] == ' ' || line[family.size()] == '{')) {
            sum += std::stoull(std::string(line.substr(line.rfind(' ') + 1)));
        }
        at = nl == std::string::npos ? body.size() : nl + 1;
    }
    return sum;
}

std::size_t lines_with(const std::string& text, std::string_view part) {
    std::size_t n = 0;
    for (std::size_t at = 0; at < text.size();) {
        const auto nl = text.find('\n', at);
        const std::string_view line(text.data() + at,
                                    (nl == std::string::npos ? text.size() : nl) - at);
        n += line.find(part) != std::string_view::npos ? 1 : 0;
        at = nl == std::string::npos ? text.size() : nl + 1;
    }
    return n;
}

}  // namespace

TEST_CASE(
    "crafted node files beside a real agent are refused while the node's target stays up "
    "with the agent's exact bytes",
    "[exporter]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    const temp_dir prom_dir;
    spawn_options demo_options;
    demo_options.argv = {XTEL_XFER_DEMO,
                         "--op",
                         "write",
                         "--total",
                         std::to_string(transfers * block),
                         "--block",
                         std::to_string(block),
                         "--initiator-name",
                         real_agent,
                         "--target-name",
                         real_agent + "_target",
                         "--linger",
                         "120"};
    demo_options.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
                        {"NIXL_TELEMETRY_METRIC_SET", "both"},
                        {"NIXL_TELEMETRY_EXPORTER", "node"},
                        {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                        {"NIXL_TELEMETRY_RUN_INTERVAL", "50"}};
    demo_options.unset = {
        "RANK",         "LOCAL_RANK",   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_PROCID", "SLURM_LOCALID"};
    child_process demo(demo_options);

    // Written by this process, which holds each file's lock as a live agent would.
    const auto cases = crafted_files(demo.pid());
    std::vector<std::unique_ptr<xtel::node::file::writer>> writers;
    for (const crafted& c : cases) {
        std::vector<std::byte> payload;
        xtel::metrics::encode_snapshot(c.snap, payload);
        writers.push_back(std::make_unique<xtel::node::file::writer>(dir.path(), c.agent));
        REQUIRE(writers.back()->publish(payload));
    }

    child_process exporter(spawn_options{
        {XTEL_EXPORTER, "--listen", "127.0.0.1:0", "--dir", dir.path().string()}, {}, {}, {}});
    const int port = served_port(exporter);
    REQUIRE(port > 0);
    const std::string tx_line =
        fmt::format(R"(agent_tx_bytes_total{{agent_name="{}",pid="{}",)", real_agent, demo.pid());
    const std::string expected = std::to_string(transfers * block);

    // The text format, as a plain GET gets it: the real agent once, with its own bytes.
    const auto body = scrape_until(port, [&](const std::string& b) {
        return value_of(b, tx_line) == expected &&
               total_of(b, "xtel_exporter_files_refused_total") >= cases.size();
    });
    INFO(body);
    CHECK(value_of(body, tx_line) == expected);
    CHECK(lines_with(body, fmt::format(R"(agent_tx_bytes_total{{agent_name="{}",)", real_agent)) ==
          1);
    CHECK(total_of(body, "xtel_exporter_files_refused_total") == cases.size());
    CHECK(lines_with(body, "crafted") == 0);

    // OpenMetrics, as Prometheus asks for it: scraped every second, the target stays up.
    prometheus_server prom(prom_dir.path(), fmt::format("127.0.0.1:{}", port));
    const auto promql = fmt::format(R"(agent_tx_bytes_total{{agent_name="{}"}})", real_agent);
    const auto stored = prom.value_until(promql, expected, std::chrono::seconds(30));
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(stored == expected);
    // A few more scrapes, all of them good: up never 0 since the first.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    CHECK(prom.value(R"(min_over_time(up{job="xtel"}[1m]))") == "1");
    CHECK(prom.value(R"(count_over_time(up{job="xtel"}[1m]))") != "");
    CHECK(prom.value(R"(count({__name__=~"crafted.*"}))") == "");

    // Each file refused once, with its reason, in one line; the files have not changed since.
    exporter.read_line("no such line", std::chrono::milliseconds(500));
    const std::string log = exporter.output();
    INFO(log);
    for (const crafted& c : cases) {
        INFO(c.agent);
        const std::string file = (dir.path() / (c.agent + ".metrics")).string();
        CHECK(lines_with(log, file) == 1);
        CHECK(lines_with(log, c.reason) == 1);
    }
}

}  // namespace crafted_node_file_test
