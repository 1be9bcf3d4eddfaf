// What xtel writes for fixed inputs, byte for byte, against files recorded before the components
// were split apart (issue 28): an agent's /metrics in both formats, its node file's payload, and
// the remote-write and OTLP requests xtel-exporter makes of the node's snapshots. A change that
// moves code must not change a byte of these; a change that means to changes them on purpose:
// XTEL_GOLDEN_UPDATE=1 writes the files again, and the diff goes in the commit.

#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prometheus_fixtures.hpp"
#include "test_util.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"
#include "xtel/push/otlp.hpp"
#include "xtel/push/remote_write.hpp"

namespace golden_test {

namespace {

namespace fs = std::filesystem;
using snapshot_ptr = std::shared_ptr<const xtel::metrics::snapshot>;

const fs::path golden_dir = fs::path(XTEL_SOURCE_DIR) / "tests" / "golden";

/// Compares `actual` with the recorded file `name`, or records it under XTEL_GOLDEN_UPDATE=1.
void matches_golden(const std::string& name, const std::string& actual) {
    const auto path = golden_dir / name;
    if (const char* update = std::getenv("XTEL_GOLDEN_UPDATE");
        update && std::string(update) == "1") {
        fs::create_directories(golden_dir);
        std::ofstream(path, std::ios::binary) << actual;
        WARN("recorded " << path.string());
        return;
    }
    const std::string expected = xtel_test::read_file(path);
    INFO(path.string() << ": " << expected.size() << " bytes recorded, " << actual.size()
                       << " now");
    REQUIRE_FALSE(expected.empty());
    CHECK(actual == expected);
}

/// Transfers of every kind the families tell apart: both directions and operations, peers,
/// memory kinds, a failure of a known kind and one of none, timed and untimed, with and
/// without a request id, at fixed times.
std::vector<xtel::transfer_record> fixed_transfers(xtel::label_table& labels) {
    const auto decode0 = labels.intern("decode-0");
    const auto decode1 = labels.intern("decode-1");
    const auto ucx = labels.intern("UCX");
    std::vector<xtel::transfer_record> out;
    const auto add = [&](xtel::direction dir, xtel::transfer_op op, xtel::label_id peer,
                         std::uint64_t bytes, std::uint64_t requests, std::uint64_t post_us,
                         std::uint64_t xfer_us, bool timed, xtel::transfer_status status,
                         std::string_view request_id) {
        xtel::transfer_record r;
        r.timestamp_us = 1'700'000'000'000'000 + out.size() * 1'000;
        r.dir = dir;
        r.bytes = bytes;
        r.requests = requests;
        r.post_us = timed ? post_us : 0;
        r.xfer_us = timed ? xfer_us : 0;
        r.timed = timed;
        r.attrs.op = op;
        r.attrs.remote_agent = peer;
        r.attrs.backend = ucx;
        r.attrs.status = status;
        r.attrs.remote_memory = peer == decode1 ? xtel::memory_kind::vram : xtel::memory_kind::dram;
        r.request_id = request_id;
        out.push_back(r);
    };
    using xtel::direction;
    using xtel::transfer_op;
    using xtel::transfer_status;
    add(direction::tx, transfer_op::write, decode0, 65536, 1, 3, 40, true, transfer_status::success,
        "req-0");
    add(direction::tx, transfer_op::write, decode0, 65536, 1, 2, 900, true,
        transfer_status::success, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    add(direction::tx, transfer_op::write, decode1, 1 << 20, 4, 0, 0, false,
        transfer_status::success, "");
    add(direction::rx, transfer_op::read, decode1, 4096, 1, 1, 15, true, transfer_status::success,
        "req-2");
    add(direction::rx, transfer_op::read, decode0, 8192, 2, 5, 120000, true,
        xtel::failed_with(xtel::status_code::timed_out), "req-3");
    add(direction::tx, transfer_op::write, decode1, 512, 1, 7, 2500000, true,
        transfer_status::error, "");
    return out;
}

/// Events no transfer stands for: memory, connections, an error, the backend, a custom value.
std::vector<xtel::event> fixed_events() {
    using prom_test::make;
    using xtel::category;
    using xtel::value_kind;
    auto events = std::vector<xtel::event>{
        make(category::memory, "agent_memory_registered", 1 << 30, value_kind::gauge),
        make(category::memory, "agent_memory_deregistered", 1 << 20, value_kind::gauge),
        make(category::connection, "agent_connections", 2, value_kind::gauge),
        make(category::error, "agent_error_timed_out", 1, value_kind::counter),
        make(category::backend, "agent_backend_lanes", 3, value_kind::gauge),
        make(category::custom, "app_cache_hits", 17, value_kind::counter),
        // UCX 1.13.1, as the agent's backend records it at start (xtel_build_info).
        make(category::backend, "ucx_version", 11301, value_kind::gauge),
    };
    for (std::size_t i = 0; i < events.size(); ++i) {
        events[i].timestamp_us = 1'700'000'000'500'000 + i;
    }
    return events;
}

/// Health rows as the pipeline hands them at a flush.
std::vector<xtel::exporter_health> fixed_health() {
    return {{"buffer", false, 2}, {"prometheus", false, 0}};
}

/// What a node exporter publishes for the fixed inputs: the payload of its file, its latency
/// histograms of `kind`.
std::vector<std::byte> node_payload(
    xtel::metrics::histogram_kind kind = xtel::metrics::histogram_kind::classic) {
    const xtel_test::temp_dir dir;
    xtel::config cfg;
    xtel::node_settings s;
    s.directory = dir.path();
    s.spans.budget = 0;  // the goldens are the surface of before the split: no span families
    xtel::metrics::agent_metrics_settings model;
    model.hostname = "h";
    model.sets = xtel::metrics::family_sets::both;  // the goldens hold every family
    model.buckets = {10, 100, 1000, 100000};
    model.histograms = kind;
    {
        // Built as the pipeline builds it; the test folds and publishes as the back end does.
        const auto m = std::make_shared<xtel::metrics::agent_metrics>("golden", model);
        xtel::node_exporter e({{cfg, "golden"}, m}, s);
        xtel::label_table labels;
        const auto transfers = fixed_transfers(labels);
        m->apply_transfers(transfers, labels);
        m->apply(fixed_events());
        const auto health = fixed_health();
        m->apply_health(health);
        m->publish();
        e.on_flush_end();
    }
    xtel::node::file::reader r(dir.path() / "golden.metrics");
    const auto p = r.read_latest();
    REQUIRE(p);
    return p->payload;
}

/// `body` without what changes from run to run: the process metrics' values, and the test's
/// own pid, which xtel_agent_info carries on an agent's own endpoint.
std::string steady(const std::string& body) {
    std::string out = prom_test::without_process_values(body);
    const std::string pid = fmt::format("pid=\"{}\"", ::getpid());
    for (auto at = out.find(pid); at != std::string::npos; at = out.find(pid, at)) {
        out.replace(at, pid.size(), "pid=\"PID\"");
    }
    return out;
}

std::string as_string(const std::vector<std::byte>& bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// The node's snapshots as xtel-exporter has them: the payload decoded, with the writer's pid
/// and its file's creation time.
std::vector<snapshot_ptr> node_snapshots() {
    auto s = xtel::metrics::decode_snapshot(node_payload());
    s.labels.push_back({"pid", "4242"});
    s.start_time_us = 1'699'999'000'000'000;
    return {std::make_shared<const xtel::metrics::snapshot>(std::move(s))};
}

}  // namespace

TEST_CASE("an agent's /metrics in both formats is what it was before the split", "[golden]") {
    prom_test::exporter_under_test t("golden", {10, 100, 1000, 100000});
    const auto transfers = fixed_transfers(t.labels);
    t.metrics->apply_transfers(transfers, t.labels);
    t.metrics->apply(fixed_events());
    const auto health = fixed_health();
    t.metrics->apply_health(health);
    t.end_round();
    // As Prometheus gets them: over HTTP, each format as its Accept header asks.
    httplib::Client c("127.0.0.1", t.exporter.port());
    const auto text = c.Get("/metrics", {{"Accept", "text/plain; version=0.0.4"}});
    const auto om = c.Get("/metrics", {{"Accept", "application/openmetrics-text; version=1.0.0"}});
    REQUIRE(text);
    REQUIRE(om);
    CHECK(text->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(om->get_header_value("Content-Type").starts_with("application/openmetrics-text"));
    matches_golden("agent_metrics.txt", steady(text->body));
    matches_golden("agent_metrics.openmetrics", steady(om->body));
}

TEST_CASE("an agent's node file payload is what it was before the split", "[golden]") {
    matches_golden("node_payload.bin", as_string(node_payload()));
}

TEST_CASE("an agent's node file payload with native histograms only is as recorded", "[golden]") {
    // tests/node_format_test.py reads it with a reader written from docs/node-format.md.
    matches_golden("node_payload_native.bin",
                   as_string(node_payload(xtel::metrics::histogram_kind::native)));
}

TEST_CASE("the remote-write request of a node is what it was before the split", "[golden]") {
    const auto snapshots = node_snapshots();
    const std::vector<xtel::metrics::label> external = {{"instance", "node-1:9465"}};
    matches_golden("remote_write.bin",
                   xtel::push::encode_write_request(snapshots, 1'700'000'010'000, external));
}

TEST_CASE("the OTLP requests of a node are what they were before the split", "[golden]") {
    const auto snapshots = node_snapshots();
    xtel::push::otlp_resource resource;
    resource.host_name = "node-1";
    resource.attributes = {{"deployment.environment", "test"}};
    constexpr std::uint64_t t1 = 1'700'000'010'000'000'000;
    constexpr std::uint64_t t2 = 1'700'000'070'000'000'000;
    for (const auto encoding :
         {xtel::push::otlp_encoding::protobuf, xtel::push::otlp_encoding::json}) {
        const std::string ext = encoding == xtel::push::otlp_encoding::json ? "json" : "bin";
        xtel::push::otlp_encoder cumulative(resource, xtel::push::otlp_temporality::cumulative);
        matches_golden("otlp_cumulative." + ext, cumulative.encode(snapshots, t1, encoding));
        // Delta: the first export from the start, the second what was gained since (nothing).
        xtel::push::otlp_encoder delta(resource, xtel::push::otlp_temporality::delta);
        matches_golden("otlp_delta_first." + ext, delta.encode(snapshots, t1, encoding));
        matches_golden("otlp_delta_second." + ext, delta.encode(snapshots, t2, encoding));
    }
}

}  // namespace golden_test
