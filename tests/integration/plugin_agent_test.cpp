// The CSV plugin behind a real agent, chosen through the environment variables alone: every
// row must match, in order, an event the agent's flight recorder got from the same pipeline;
// and beside the other built-in exporters, in every combination the registry generates.

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "test_util.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace plugin_agent_test {

namespace {

std::vector<std::string> rows_of(const std::filesystem::path& csv) {
    std::ifstream in(csv);
    std::vector<std::string> rows;
    for (std::string line; std::getline(in, line);) {
        rows.push_back(line);
    }
    return rows;
}

constexpr std::size_t block = 64 * 1024;
constexpr int transfers = 16;

/// Writes `transfers` blocks from one agent to another, each completed before the next.
void transfer_blocks(xtel::agent& target, xtel::agent& initiator) {
    std::vector<std::byte> remote(block * transfers), local(block * transfers, std::byte{5});
    REQUIRE(target.register_memory(xtel::descriptor::dram(remote.data(), remote.size())).ok());
    REQUIRE(initiator.register_memory(xtel::descriptor::dram(local.data(), local.size())).ok());
    std::vector<std::byte> blob;
    REQUIRE(target.export_metadata(blob).ok());
    std::string peer;
    REQUIRE(initiator.load_remote_metadata(blob, peer).ok());
    for (int i = 0; i < transfers; ++i) {
        const std::vector<xtel::descriptor> l{
            xtel::descriptor::dram(local.data() + i * block, block)};
        const std::vector<xtel::descriptor> r{
            xtel::descriptor::dram(remote.data() + i * block, block)};
        xtel::transfer_handle h;
        REQUIRE(initiator.create_transfer(xtel::transfer_op::write, l, r, peer, h).ok());
        auto st = initiator.post(h);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (st.code() == xtel::status_code::in_progress &&
               std::chrono::steady_clock::now() < give_up) {
            target.progress();
            st = initiator.poll(h);
        }
        REQUIRE(st.ok());
        REQUIRE(initiator.release(h).ok());
    }
    CHECK(remote == local);
    CHECK(initiator.deregister_memory(xtel::descriptor::dram(local.data(), local.size())).ok());
    CHECK(target.deregister_memory(xtel::descriptor::dram(remote.data(), remote.size())).ok());
}

/// The sum of the agent_tx_bytes rows of a CSV file the csv plugin wrote.
std::uint64_t csv_tx_bytes(const std::filesystem::path& csv) {
    std::uint64_t sum = 0;
    for (const auto& row : rows_of(csv)) {
        const std::string key = ",agent_tx_bytes,";
        if (const auto at = row.find(key); at != std::string::npos) {
            sum += std::stoull(row.substr(at + key.size()));
        }
    }
    return sum;
}

}  // namespace

TEST_CASE("an agent configured by the environment alone writes CSV rows that match its events") {
    xtel_test::temp_dir out;
    const xtel_test::scoped_env enable{"NIXL_TELEMETRY_ENABLE", "yes"};
    const xtel_test::scoped_env sets{"NIXL_TELEMETRY_METRIC_SET", "both"};
    const xtel_test::scoped_env exporter{"NIXL_TELEMETRY_EXPORTER", "csv,buffer"};
    const xtel_test::scoped_env plugin_dir{"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR",
                                           XTEL_CSV_PLUGIN_DIR};
    const xtel_test::scoped_env output{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", out.path().string()};
    const xtel_test::scoped_env size{"NIXL_TELEMETRY_BUFFER_SIZE", "65536"};
    const xtel_test::scoped_env interval{"NIXL_TELEMETRY_RUN_INTERVAL", "5"};

    {
        const auto target = xtel::make_agent("csv-target");
        const auto initiator = xtel::make_agent("csv-initiator");
        transfer_blocks(*target, *initiator);
    }

    // The flight recorder and the CSV file were fed by the same pipeline: the same events in the
    // same order.
    std::vector<std::string> expected{"timestamp_us,category,event_name,value"};
    std::uint64_t tx_bytes = 0;
    xtel::flight_recorder::reader r(out.path() / "csv-initiator");
    r.poll([&](const xtel::event& e) {
        expected.push_back(std::to_string(e.timestamp_us) + "," +
                           std::string(xtel::to_string(e.cat)) + "," + std::string(e.name_view()) +
                           "," + std::to_string(e.value));
        if (e.name_view() == "agent_tx_bytes") {
            tx_bytes += e.value;
        }
    });
    REQUIRE(r.missed() == 0);
    CHECK(tx_bytes == block * transfers);
    const auto rows = rows_of(out.path() / "csv-initiator.csv");
    CHECK(rows.size() > 4 * transfers);
    CHECK(rows == expected);
}

/// Prometheus with the csv plugin (and, in the second section, the flight recorder too): sets
/// nobody listed by hand before the registry generated every combination.
TEST_CASE("Prometheus and a plugin together make an agent that transfers and exports to both") {
    xtel_test::temp_dir out;
    const xtel_test::scoped_env enable{"NIXL_TELEMETRY_ENABLE", "yes"};
    const xtel_test::scoped_env sets{"NIXL_TELEMETRY_METRIC_SET", "both"};
    const xtel_test::scoped_env plugin_dir{"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR",
                                           XTEL_CSV_PLUGIN_DIR};
    const xtel_test::scoped_env output{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", out.path().string()};
    // OUTPUT_PATH is the csv plugin's directory here, so Prometheus gets its own address.
    const xtel_test::scoped_env address{"NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "127.0.0.1:0"};

    auto check_pipeline = [&](const char* exporters, auto pipeline) {
        using agent_type = xtel::basic_agent<typename decltype(pipeline)::type>;
        const xtel_test::scoped_env exporter{"NIXL_TELEMETRY_EXPORTER", exporters};
        {
            const auto target = xtel::make_agent("combo-target");
            const auto initiator = xtel::make_agent("combo-initiator");
            // The registry picked the generated pipeline of exactly these exporters.
            auto* agent = dynamic_cast<agent_type*>(initiator.get());
            REQUIRE(agent != nullptr);
            transfer_blocks(*target, *initiator);
            initiator->flush_telemetry();
            const auto& prometheus = agent->telemetry().template get<xtel::prometheus_exporter>();
            REQUIRE(prometheus.active());
            const std::string text = prometheus.scrape();
            const auto at = text.find("agent_tx_bytes_total{agent_name=\"combo-initiator\"");
            REQUIRE(at != std::string::npos);
            const std::string line = text.substr(at, text.find('\n', at) - at);
            CHECK(line.substr(line.rfind(' ') + 1) == std::to_string(block * transfers));
            CHECK(initiator->stats().export_errors == 0);
            CHECK(initiator->stats().exporters_disabled == 0);
        }
        // The plugin's file is complete once the agent is gone.
        CHECK(csv_tx_bytes(out.path() / "combo-initiator.csv") == block * transfers);
    };

    SECTION("prometheus,csv") {
        check_pipeline("prometheus,csv",
                       std::type_identity<
                           xtel::pipeline_of<xtel::prometheus_exporter, xtel::plugin_exporter>>{});
    }
    SECTION("csv,prometheus,buffer") {
        check_pipeline(
            "csv,prometheus,buffer",
            std::type_identity<xtel::pipeline_of<xtel::buffer_exporter, xtel::prometheus_exporter,
                                                 xtel::plugin_exporter>>{});
        CHECK(std::filesystem::is_regular_file(out.path() / "combo-initiator"));
    }
}

}  // namespace plugin_agent_test
