// End to end: two agents in one process move data over UCX; the initiator's Prometheus
// exporter serves the metrics processor's series, and a real HTTP scrape of /metrics shows
// exactly what moved, per attribute set.

#include <httplib.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "agent_support.hpp"
#include "test_util.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/agent/device.hpp"
#include "xtel/core/transfer.hpp"
#include "xtel/metrics/attributes.hpp"

namespace metrics_agent_test {

using xtel::descriptor;
using xtel::status_code;
using xtel::transfer_handle;
using xtel::transfer_op;

namespace {

/// The value of the line that starts with `series` followed by a space; empty when absent.
std::string value_of(const std::string& text, const std::string& series) {
    const auto at = text.find("\n" + series + " ");
    if (at == std::string::npos) {
        return {};
    }
    const auto begin = at + series.size() + 2;
    return text.substr(begin, text.find('\n', begin) - begin);
}

std::string scrape(std::uint16_t port) {
    httplib::Client c("127.0.0.1", port);
    const auto res = c.Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    return res->body;
}

struct prometheus_pair {
    prometheus_pair()
        : address(xtel::env::prometheus_address, "127.0.0.1:0"),
          sets("NIXL_TELEMETRY_METRIC_SET", "both"),
          cfg(config()),
          initiator("initiator", cfg),
          target(xtel::make_agent("target", xtel::config{})) {}

    static xtel::config config() {
        xtel::config c;
        c.enabled = true;
        c.exporters = {"prometheus"};
        c.run_interval = std::chrono::milliseconds(20);
        return c;
    }

    void connect() {
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string name;
        REQUIRE(initiator.load_remote_metadata(blob, name).ok());
        REQUIRE(name == "target");
    }

    transfer_handle create(transfer_op op,
                           const std::vector<descriptor>& local,
                           const std::vector<descriptor>& remote) {
        transfer_handle h;
        REQUIRE(initiator.create_transfer(op, local, remote, "target", h).ok());
        return h;
    }

    xtel::prometheus_exporter& exporter() {
        return initiator.telemetry().get<xtel::prometheus_exporter>();
    }

    /// The labels of an initiator series to the target, after agent_name.
    std::string labels(std::string_view op, std::string_view dir, std::string_view status) const {
        const auto& gpu = xtel::metrics::local_gpu_identifier();
        return fmt::format(
            R"(agent_name="initiator",backend="ucx",operation="{}",direction="{}",)"
            R"(local_memory="dram",remote_memory="dram",remote_agent="target",status="{}",gpu="{}")",
            op, dir, status, gpu.empty() ? "unknown" : gpu);
    }

    /// The labels of the initiator's NIXL-set series: agent_name and hostname.
    std::string nixl_labels() const {
        return fmt::format(R"(agent_name="initiator",hostname="{}")",
                           xtel::metrics::agent_metrics_settings::from_env().hostname);
    }

    xtel_test::scoped_env address;
    xtel_test::scoped_env sets;  // both sets: these tests check each family of both
    xtel::config cfg;
    xtel::basic_agent<xtel::prometheus_telemetry> initiator;
    std::unique_ptr<xtel::agent> target;
};

descriptor slice(std::vector<std::byte>& v, std::size_t offset, std::size_t n) {
    return descriptor::dram(v.data() + offset, n);
}

}  // namespace

TEST_CASE("a scrape of an agent's /metrics shows its transfers' bytes per attribute set, exactly") {
    prometheus_pair p;
    REQUIRE(p.exporter().active());
    std::vector<std::byte> remote_mem(1 << 20), local_mem(1 << 20);
    REQUIRE(p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
    REQUIRE(p.initiator.register_memory(descriptor::dram(local_mem.data(), local_mem.size())).ok());
    p.connect();

    // 3 WRITEs of 4 + 8 KiB in two descriptors, 2 READs of 64 KiB.
    const auto w =
        p.create(transfer_op::write, {slice(local_mem, 0, 4096), slice(local_mem, 8192, 8192)},
                 {slice(remote_mem, 0, 4096), slice(remote_mem, 8192, 8192)});
    const auto r = p.create(transfer_op::read, {slice(local_mem, 65536, 65536)},
                            {slice(remote_mem, 131072, 65536)});
    for (int i = 0; i < 3; ++i) {
        REQUIRE(agent_test::run(p.initiator, w, p.target.get()).ok());
    }
    for (int i = 0; i < 2; ++i) {
        REQUIRE(agent_test::run(p.initiator, r, p.target.get()).ok());
    }
    // The target goes: the next WRITE fails, and is counted under the kind of its failure.
    p.target.reset();
    REQUIRE(p.initiator.post(w).code() == status_code::remote_disconnected);
    p.initiator.flush_telemetry();

    const auto text = scrape(p.exporter().port());
    INFO(text);
    const auto write_ok = p.labels("write", "tx", "success");
    const auto read_ok = p.labels("read", "rx", "success");
    const auto write_failed = p.labels("write", "tx", "remote_disconnected");
    CHECK(value_of(text, "xtel_transfer_bytes_total{" + write_ok + "}") == "36864");
    CHECK(value_of(text, "xtel_transfer_requests_total{" + write_ok + "}") == "3");
    CHECK(value_of(text, "xtel_transfer_bytes_total{" + read_ok + "}") == "131072");
    CHECK(value_of(text, "xtel_transfer_requests_total{" + read_ok + "}") == "2");
    CHECK(value_of(text, "xtel_transfer_bytes_total{" + write_failed + "}") == "12288");
    CHECK(value_of(text, "xtel_transfer_requests_total{" + write_failed + "}") == "1");
    // Times: the histograms (the time builder is not a default one).
    CHECK(
        value_of(
            text,
            R"(xtel_transfer_duration_seconds_count{agent_name="initiator",operation="read",remote_agent="target"})") ==
        "2");

    // The legacy names count the completed transfers once: not doubled, and without the failure.
    const auto agent = "{" + p.nixl_labels() + "}";
    CHECK(value_of(text, "agent_tx_bytes_total" + agent) == "36864");
    CHECK(value_of(text, "agent_tx_requests_num_total" + agent) == "3");
    CHECK(value_of(text, "agent_rx_bytes_total" + agent) == "131072");
    CHECK(value_of(text, "agent_rx_requests_num_total" + agent) == "2");
    CHECK(value_of(text, "agent_xfer_time_us_count" + agent) == "5");
    CHECK(p.initiator.stats().records_dropped == 0);
}

TEST_CASE("an agent names each peer in its own series") {
    prometheus_pair p;
    auto other = xtel::make_agent("other-peer", xtel::config{});
    std::vector<std::byte> a(65536), b(65536), local(65536);
    REQUIRE(p.target->register_memory(descriptor::dram(a.data(), a.size())).ok());
    REQUIRE(other->register_memory(descriptor::dram(b.data(), b.size())).ok());
    REQUIRE(p.initiator.register_memory(descriptor::dram(local.data(), local.size())).ok());
    p.connect();
    std::vector<std::byte> blob;
    REQUIRE(other->export_metadata(blob).ok());
    std::string name;
    REQUIRE(p.initiator.load_remote_metadata(blob, name).ok());

    const auto to_target =
        p.create(transfer_op::write, {slice(local, 0, 1000)}, {slice(a, 0, 1000)});
    transfer_handle to_other;
    REQUIRE(p.initiator
                .create_transfer(transfer_op::write, std::vector{slice(local, 0, 300)},
                                 std::vector{slice(b, 0, 300)}, "other-peer", to_other)
                .ok());
    REQUIRE(agent_test::run(p.initiator, to_target, p.target.get()).ok());
    REQUIRE(agent_test::run(p.initiator, to_other, other.get()).ok());
    REQUIRE(agent_test::run(p.initiator, to_other, other.get()).ok());
    p.initiator.flush_telemetry();

    const auto text = scrape(p.exporter().port());
    INFO(text);
    auto to_other_labels = p.labels("write", "tx", "success");
    to_other_labels.replace(to_other_labels.find(R"(remote_agent="target")"),
                            std::string_view(R"(remote_agent="target")").size(),
                            R"(remote_agent="other-peer")");
    CHECK(value_of(text, "xtel_transfer_bytes_total{" + p.labels("write", "tx", "success") + "}") ==
          "1000");
    CHECK(value_of(text, "xtel_transfer_bytes_total{" + to_other_labels + "}") == "600");
}

namespace {

/// GET /metrics as Prometheus asks for it: OpenMetrics, not compressed.
std::string scrape_openmetrics(std::uint16_t port) {
    httplib::Client c("127.0.0.1", port);
    const auto res = c.Get("/metrics", {{"Accept",
                                         "application/openmetrics-text;version=1.0.0,"
                                         "application/openmetrics-text;version=0.0.1;q=0.75,"
                                         "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"}});
    REQUIRE(res);
    REQUIRE(res->status == 200);
    REQUIRE(res->get_header_value("Content-Type") ==
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
    return res->body;
}

/// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, std::string_view prefix) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < text.size()) {
        const auto end = std::min(text.find('\n', at), text.size());
        if (std::string_view(text).substr(at, end - at).starts_with(prefix)) {
            out.push_back(text.substr(at, end - at));
        }
        at = end + 1;
    }
    return out;
}

std::string ucx_version() {
    unsigned major = 0, minor = 0, release = 0;
    ::ucp_get_version(&major, &minor, &release);
    return fmt::format("{}.{}.{}", major, minor, release);
}

}  // namespace

TEST_CASE("every family of both sets shows exactly what the agent did") {
    const auto wall_seconds = [] {
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    };
    const double before_start = wall_seconds();
    prometheus_pair p;
    REQUIRE(p.exporter().active());
    std::vector<std::byte> remote_mem(1 << 20), local_mem(1 << 20);
    REQUIRE(p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
    const auto local = descriptor::dram(local_mem.data(), local_mem.size());
    REQUIRE(p.initiator.register_memory(local).ok());
    p.connect();

    // 3 WRITEs of 12 KiB tagged w-<n>, 2 READs of 64 KiB tagged r-<n>: fewer than the timing
    // sample per flush interval, so every one is timed.
    std::vector<transfer_handle> handles;
    for (int i = 0; i < 3; ++i) {
        const auto id = fmt::format("w-{}", i);
        transfer_handle h;
        REQUIRE(p.initiator
                    .create_transfer(
                        transfer_op::write,
                        std::vector{slice(local_mem, 0, 4096), slice(local_mem, 8192, 8192)},
                        std::vector{slice(remote_mem, 0, 4096), slice(remote_mem, 8192, 8192)},
                        "target", h, xtel::transfer_tags{.request_id = id})
                    .ok());
        REQUIRE(agent_test::run(p.initiator, h, p.target.get()).ok());
        handles.push_back(h);
    }
    for (int i = 0; i < 2; ++i) {
        const auto id = fmt::format("r-{}", i);
        transfer_handle h;
        REQUIRE(p.initiator
                    .create_transfer(transfer_op::read, std::vector{slice(local_mem, 65536, 65536)},
                                     std::vector{slice(remote_mem, 131072, 65536)}, "target", h,
                                     xtel::transfer_tags{.request_id = id})
                    .ok());
        REQUIRE(agent_test::run(p.initiator, h, p.target.get()).ok());
        handles.push_back(h);
    }
    // One error: a peer nobody loaded.
    transfer_handle nowhere;
    REQUIRE(p.initiator
                .create_transfer(transfer_op::write, std::vector{slice(local_mem, 0, 64)},
                                 std::vector{slice(remote_mem, 0, 64)}, "nobody", nowhere)
                .code() == status_code::not_found);
    for (const auto h : handles) {
        REQUIRE(p.initiator.release(h).ok());
    }
    REQUIRE(p.initiator.deregister_memory(local).ok());
    REQUIRE(p.initiator.disconnect("target").ok());
    p.initiator.flush_telemetry();

    const auto text = scrape(p.exporter().port());
    INFO(text);
    const auto nixl = "{" + p.nixl_labels() + "}";
    const auto nixl_with = [&](std::string_view more) {
        return "{" + p.nixl_labels() + "," + std::string(more) + "}";
    };
    // The NIXL set.
    CHECK(value_of(text, "agent_tx_bytes_total" + nixl) == "36864");
    CHECK(value_of(text, "agent_tx_requests_num_total" + nixl) == "3");
    CHECK(value_of(text, "agent_rx_bytes_total" + nixl) == "131072");
    CHECK(value_of(text, "agent_rx_requests_num_total" + nixl) == "2");
    CHECK(value_of(text, "agent_tx_last_bytes" + nixl) == "12288");
    CHECK(value_of(text, "agent_rx_last_bytes" + nixl) == "65536");
    CHECK(value_of(text, "agent_memory_registered_total" + nixl) == "1048576");
    CHECK(value_of(text, "agent_memory_registered_last_bytes" + nixl) == "1048576");
    CHECK(value_of(text, "agent_memory_deregistered_total" + nixl) == "1048576");
    CHECK(value_of(text, "agent_memory_deregistered_last_bytes" + nixl) == "1048576");
    CHECK(value_of(text, "agent_xfer_time_us_count" + nixl) == "5");
    CHECK(value_of(text, "agent_xfer_time_us_bucket" + nixl_with(R"(le="+Inf")")) == "5");
    CHECK(value_of(text, "agent_xfer_post_time_us_count" + nixl) == "5");
    CHECK(value_of(text, "agent_xfer_time_total" + nixl) ==
          value_of(text, "agent_xfer_time_us_sum" + nixl));
    CHECK(value_of(text, "agent_telemetry_events_dropped_total" + nixl) == "0");
    CHECK(value_of(text, "agent_errors_total" + nixl_with(R"(status="not_found")")) == "1");
    for (const char* other :
         {"not_posted", "invalid_param", "backend", "mismatch", "not_allowed", "repost_active",
          "unknown", "not_supported", "remote_disconnect", "canceled", "no_telemetry"}) {
        CHECK(value_of(text, "agent_errors_total" +
                                 nixl_with(fmt::format(R"(status="{}")", other))) == "0");
    }

    // The xtel set.
    const std::string me = R"(agent_name="initiator")";
    const auto xtel_with = [&](std::string_view more) {
        return "{" + me + (more.empty() ? "" : ",") + std::string(more) + "}";
    };
    for (const char* family :
         {"xtel_transfer_duration_seconds", "xtel_transfer_post_duration_seconds"}) {
        CHECK(value_of(text, std::string(family) + "_count" +
                                 xtel_with(R"(operation="write",remote_agent="target")")) == "3");
        CHECK(value_of(text, std::string(family) + "_count" +
                                 xtel_with(R"(operation="read",remote_agent="target")")) == "2");
    }
    CHECK(value_of(text, "xtel_errors_total" + xtel_with(R"(kind="not_found")")) == "1");
    for (const char* other : {"invalid_argument", "busy", "not_supported", "bad_metadata",
                              "remote_disconnected", "timed_out", "backend_error"}) {
        CHECK(value_of(text, "xtel_errors_total" + xtel_with(fmt::format(R"(kind="{}")", other))) ==
              "0");
    }
    CHECK(value_of(text, "xtel_memory_registered_bytes" + xtel_with("")) == "0");
    CHECK(value_of(text, "xtel_memory_registrations_total" + xtel_with("")) == "1");
    CHECK(value_of(text, "xtel_memory_deregistrations_total" + xtel_with("")) == "1");
    CHECK(value_of(text, "xtel_connections" + xtel_with("")) == "0");
    CHECK(value_of(text, "xtel_connections_opened_total" + xtel_with("")) == "1");
    CHECK(value_of(text, "xtel_connections_closed_total" + xtel_with("")) == "1");
    CHECK(value_of(text, "xtel_ucx_endpoint_errors_total" + xtel_with("")) == "0");
    CHECK(value_of(text, "xtel_build_info" +
                             xtel_with(fmt::format(R"(version="{}",ucx_version="{}")",
                                                   XTEL_PROJECT_VERSION, ucx_version()))) == "1");
    CHECK(value_of(text, "xtel_agent_info" + xtel_with(fmt::format(R"(backend="ucx",pid="{}")",
                                                                   ::getpid()))) == "1");
    // Its start, to the microsecond, between the test's start and the scrape.
    const auto started = value_of(text, "xtel_agent_start_time_seconds" + xtel_with(""));
    REQUIRE_FALSE(started.empty());
    CHECK(std::stod(started) >= before_start - 1e-6);
    CHECK(std::stod(started) <= wall_seconds());
    CHECK(started.size() == started.find('.') + 7);
    CHECK(value_of(text, "xtel_telemetry_exporter_up" + xtel_with(R"(exporter="prometheus")")) ==
          "1");
    CHECK(value_of(text, "xtel_telemetry_exporter_events_lost_total" +
                             xtel_with(R"(exporter="prometheus")")) == "0");
    CHECK(value_of(text, "xtel_telemetry_events_dropped_total" + xtel_with("")) == "0");
    CHECK(value_of(text, "xtel_telemetry_export_errors_total" + xtel_with("")) == "0");
    // The one connection used at least one UCX transport, each with at least one lane.
    const auto lanes = lines_starting(text, "xtel_transport_lanes{" + me + ",transport=\"");
    CHECK_FALSE(lanes.empty());
    for (const auto& line : lanes) {
        CHECK(std::stoi(line.substr(line.rfind(' ') + 1)) >= 1);
    }

    // OpenMetrics: the latency buckets carry the ids the transfers were created with.
    const auto om = scrape_openmetrics(p.exporter().port());
    INFO(om);
    const auto write_buckets =
        lines_starting(om, "xtel_transfer_duration_seconds_bucket{" + me +
                               R"(,operation="write",remote_agent="target",)");
    const auto read_buckets = lines_starting(om, "xtel_transfer_duration_seconds_bucket{" + me +
                                                     R"(,operation="read",remote_agent="target",)");
    const auto ids_in = [](const std::vector<std::string>& lines, std::string_view prefix) {
        std::size_t n = 0;
        for (const auto& l : lines) {
            const auto at = l.find(" # {request_id=\"");
            if (at != std::string::npos) {
                CHECK(l.substr(at + 16, prefix.size()) == prefix);
                ++n;
            }
        }
        return n;
    };
    CHECK(ids_in(write_buckets, "w-") >= 1);
    CHECK(ids_in(read_buckets, "r-") >= 1);
    CHECK(om.ends_with("# EOF\n"));
}

}  // namespace metrics_agent_test
