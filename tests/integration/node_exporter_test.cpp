// The node exporter end to end: agents over UCX publish their metric state into node files,
// which a reader in this process (and, for xfer_demo, after the writer's process has gone)
// decodes into the exact values the agents produced.

#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "agent_support.hpp"
#include "prometheus_support.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace node_exporter_test {

using xtel::descriptor;
using xtel::transfer_handle;
using xtel::transfer_op;
using xtel_test::temp_dir;

namespace {

/// The latest snapshot in a node file.
xtel::metrics::snapshot latest(const std::filesystem::path& file) {
    xtel::node::file::reader r(file);
    const auto p = r.read_latest();
    REQUIRE(p);
    REQUIRE(p->number > 0);
    return xtel::metrics::decode_snapshot(p->payload);
}

/// The value (counter, gauge) or count (histogram) of the series of `family` with `values`.
std::optional<std::uint64_t> value_of(const xtel::metrics::snapshot& s,
                                      std::string_view family,
                                      const std::vector<std::string>& values) {
    for (const auto& f : s.families) {
        if (f.spec.name != family) {
            continue;
        }
        for (const auto& series : f.series) {
            if (series.label_values == values) {
                return f.spec.type == xtel::metrics::metric_type::histogram ? series.count
                                                                            : series.value;
            }
        }
    }
    return std::nullopt;
}

xtel::config node_config(const temp_dir& dir) {
    xtel::config c;
    c.enabled = true;
    c.exporters = {"node"};
    c.output_path = dir.path().string();
    c.run_interval = std::chrono::milliseconds(20);
    return c;
}

}  // namespace

TEST_CASE("an agent's node file holds its metric state after every flush, and after it stops") {
    const xtel_test::scoped_env sets("NIXL_TELEMETRY_METRIC_SET", "both");  // each family of both
    const temp_dir dir;
    const auto cfg = node_config(dir);
    const auto file = dir.path() / "initiator.metrics";
    auto target = xtel::make_agent("target", xtel::config{});
    std::vector<std::byte> remote(1 << 16), local(1 << 16);
    REQUIRE(target->register_memory(descriptor::dram(remote.data(), remote.size())).ok());
    {
        auto initiator = xtel::make_agent("initiator", cfg);
        REQUIRE(initiator->telemetry_enabled());
        REQUIRE(initiator->register_memory(descriptor::dram(local.data(), local.size())).ok());
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string name;
        REQUIRE(initiator->load_remote_metadata(blob, name).ok());

        // The file exists from the start, its families at 0.
        REQUIRE(std::filesystem::exists(file));
        CHECK((std::filesystem::status(file).permissions() & std::filesystem::perms::all) ==
              (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
        {
            const xtel::node::file::reader r(file);
            CHECK(r.writer_alive());
            CHECK_FALSE(r.closed());
            CHECK(r.writer_pid() == static_cast<std::uint32_t>(::getpid()));
            CHECK(r.agent_name() == "initiator");
        }
        const auto first = latest(file);
        CHECK(value_of(first, "agent_tx_bytes_total",
                       {xtel::metrics::agent_metrics_settings::from_env().hostname}) == 0u);
        CHECK(value_of(first, "agent_errors_total",
                       {xtel::metrics::agent_metrics_settings::from_env().hostname,
                        "no_telemetry"}) == 0u);

        for (int i = 0; i < 3; ++i) {
            transfer_handle h;
            REQUIRE(initiator
                        ->create_transfer(transfer_op::write,
                                          std::vector{descriptor::dram(local.data(), 4096)},
                                          std::vector{descriptor::dram(remote.data(), 4096)},
                                          "target", h, xtel::transfer_tags{.request_id = "n-1"})
                        .ok());
            REQUIRE(agent_test::run(*initiator, h, target.get()).ok());
            REQUIRE(initiator->release(h).ok());
        }
        initiator->flush_telemetry();
        const auto s = latest(file);
        REQUIRE(s.labels.size() == 1);
        CHECK(s.labels[0].name == "agent_name");
        CHECK(s.labels[0].value == "initiator");
        const auto host = xtel::metrics::agent_metrics_settings::from_env().hostname;
        CHECK(value_of(s, "agent_tx_bytes_total", {host}) == 3 * 4096u);
        CHECK(value_of(s, "agent_tx_requests_num_total", {host}) == 3u);
        CHECK(value_of(s, "xtel_transfer_duration_seconds", {"write", "target"}) == 3u);
        CHECK(value_of(s, "xtel_memory_registered_bytes", {}) == std::uint64_t{1} << 16);
        CHECK(value_of(s, "xtel_connections", {}) == 1u);
        // The exporter adds the writer's pid to every series: the file's xtel_agent_info has
        // no pid label of its own, which would make a series carry it twice.
        CHECK(value_of(s, "xtel_agent_info", {"ucx"}) == 1u);
        CHECK(value_of(s, "xtel_telemetry_exporter_up", {"node"}) == 1u);
        CHECK(value_of(s, "xtel_errors_total", {"not_found"}) == 0u);
        // The exemplar of the request id travels in the file too.
        const auto& f = *std::find_if(s.families.begin(), s.families.end(), [](const auto& f) {
            return f.spec.name == "xtel_transfer_duration_seconds";
        });
        bool tagged = false;
        for (const auto& series : f.series) {
            for (const auto& ex : series.exemplars) {
                tagged = tagged || (ex.label_name == "request_id" && ex.label_value == "n-1");
            }
        }
        CHECK(tagged);
    }
    // The agent is gone: the file stays, closed, with the state it ended with.
    const xtel::node::file::reader r(file);
    CHECK(r.closed());
    CHECK_FALSE(r.writer_alive());
    const auto last = latest(file);
    const auto host = xtel::metrics::agent_metrics_settings::from_env().hostname;
    CHECK(value_of(last, "agent_tx_bytes_total", {host}) == 3 * 4096u);
    CHECK(value_of(last, "xtel_memory_registered_bytes", {}) == 0u);
}

TEST_CASE("a second agent of the same name in the same directory leaves the first's node file") {
    const temp_dir dir;
    const auto cfg = node_config(dir);
    auto first = xtel::make_agent("twin", cfg);
    auto second = xtel::make_agent("twin", cfg);  // logs an error; its node exporter is off
    REQUIRE(first->telemetry_enabled());
    first->flush_telemetry();
    second->flush_telemetry();
    const xtel::node::file::reader r(dir.path() / "twin.metrics");
    CHECK(r.writer_pid() == static_cast<std::uint32_t>(::getpid()));
    CHECK(r.writer_alive());
    const auto s = latest(dir.path() / "twin.metrics");
    CHECK(value_of(s, "xtel_telemetry_exporter_up", {"node"}) == 1u);
}

TEST_CASE("xfer_demo with the node exporter leaves node files holding exactly the bytes it moved") {
    const temp_dir dir;
    constexpr std::uint64_t transfers = 200, block = 65536;
    prom_it::spawn_options o;
    o.argv = {XTEL_XFER_DEMO,
              "--op",
              "write",
              "--total",
              std::to_string(transfers * block),
              "--block",
              std::to_string(block),
              "--initiator-name",
              "node-it",
              "--target-name",
              "node-it-target"};
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_METRIC_SET", "both"},
             {"NIXL_TELEMETRY_EXPORTER", "node"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()}};
    prom_it::child_process demo(o);
    // It says where each agent's node file is, with the suffix the file has.
    const auto said = demo.read_line("initiator 'node-it':", std::chrono::seconds(60));
    CHECK(said ==
          "initiator 'node-it': telemetry node -> " + dir.path().string() + "/node-it.metrics");
    const auto rc = demo.wait(std::chrono::seconds(120));
    INFO(demo.output());
    REQUIRE(rc == 0);
    for (const char* agent : {"node-it", "node-it-target"}) {
        const auto file = dir.path() / (std::string(agent) + ".metrics");
        INFO(file.filename().string());
        REQUIRE(std::filesystem::exists(file));
        const xtel::node::file::reader r(file);
        CHECK(r.closed());
        CHECK(r.agent_name() == agent);
    }
    const auto s = latest(dir.path() / "node-it.metrics");
    const auto host = xtel::metrics::agent_metrics_settings::from_env().hostname;
    CHECK(value_of(s, "agent_tx_bytes_total", {host}) == transfers * block);
    CHECK(value_of(s, "agent_tx_requests_num_total", {host}) == transfers);
    CHECK(value_of(s, "xtel_errors_total", {"timed_out"}) == 0u);
}

}  // namespace node_exporter_test
