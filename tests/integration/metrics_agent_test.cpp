// End to end: two agents in one process move data over UCX; the initiator's Prometheus
// exporter serves the metrics processor's series, and a real HTTP scrape of /metrics shows
// exactly what moved, per attribute set.

#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "agent_support.hpp"
#include "test_util.hpp"
#include "xtel/agent.hpp"
#include "xtel/basic_agent.hpp"
#include "xtel/device.hpp"
#include "xtel/metrics/attributes.hpp"

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

    /// The labels of an initiator series to the target, after agent_name and hostname.
    std::string labels(std::string_view op, std::string_view dir, std::string_view status) const {
        const auto& gpu = xtel::metrics::local_gpu_identifier();
        return fmt::format(
            R"(agent_name="initiator",hostname="{}",backend="ucx",operation="{}",direction="{}",)"
            R"(local_memory="dram",remote_memory="dram",remote_agent="target",status="{}",gpu="{}")",
            xtel::prometheus_settings::from_env(cfg).hostname, op, dir, status,
            gpu.empty() ? "unknown" : gpu);
    }

    xtel_test::scoped_env address;
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
    CHECK_FALSE(value_of(text, "xtel_transfer_time_seconds_total{" + read_ok + "}").empty());

    // The legacy names count the completed transfers once: not doubled, and without the failure.
    const auto agent = fmt::format(R"({{agent_name="initiator",hostname="{}"}})",
                                   xtel::prometheus_settings::from_env(p.cfg).hostname);
    CHECK(value_of(text, "agent_tx_bytes_total" + agent) == "36864");
    CHECK(value_of(text, "agent_tx_requests_num_total" + agent) == "3");
    CHECK(value_of(text, "agent_rx_bytes_total" + agent) == "131072");
    CHECK(value_of(text, "agent_rx_requests_num_total" + agent) == "2");
    CHECK(value_of(text, "agent_xfer_time_count" + agent) == "5");
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
