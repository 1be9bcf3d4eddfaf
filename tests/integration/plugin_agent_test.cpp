// The CSV plugin behind a real agent, chosen through the environment variables alone: every
// row must match, in order, an event the agent's flight recorder got from the same pipeline.

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "test_util.hpp"
#include "xtel/flight_recorder.hpp"
#include "xtel/registry.hpp"

namespace {

std::vector<std::string> rows_of(const std::filesystem::path& csv) {
    std::ifstream in(csv);
    std::vector<std::string> rows;
    for (std::string line; std::getline(in, line);) {
        rows.push_back(line);
    }
    return rows;
}

}  // namespace

TEST_CASE("an agent configured by the environment alone writes CSV rows that match its events") {
    xtel_test::temp_dir out;
    const xtel_test::scoped_env enable{"NIXL_TELEMETRY_ENABLE", "yes"};
    const xtel_test::scoped_env exporter{"NIXL_TELEMETRY_EXPORTER", "csv,buffer"};
    const xtel_test::scoped_env plugin_dir{"NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR",
                                           XTEL_CSV_PLUGIN_DIR};
    const xtel_test::scoped_env output{"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", out.path().string()};
    const xtel_test::scoped_env size{"NIXL_TELEMETRY_BUFFER_SIZE", "65536"};
    const xtel_test::scoped_env interval{"NIXL_TELEMETRY_RUN_INTERVAL", "5"};

    constexpr std::size_t block = 64 * 1024;
    constexpr int transfers = 16;
    {
        const auto target = xtel::make_agent("csv-target");
        const auto initiator = xtel::make_agent("csv-initiator");
        std::vector<std::byte> remote(block * transfers), local(block * transfers, std::byte{5});
        REQUIRE(target->register_memory(xtel::descriptor::dram(remote.data(), remote.size())).ok());
        REQUIRE(
            initiator->register_memory(xtel::descriptor::dram(local.data(), local.size())).ok());
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string peer;
        REQUIRE(initiator->load_remote_metadata(blob, peer).ok());
        for (int i = 0; i < transfers; ++i) {
            const std::vector<xtel::descriptor> l{
                xtel::descriptor::dram(local.data() + i * block, block)};
            const std::vector<xtel::descriptor> r{
                xtel::descriptor::dram(remote.data() + i * block, block)};
            xtel::transfer_handle h;
            REQUIRE(initiator->create_transfer(xtel::transfer_op::write, l, r, peer, h).ok());
            auto st = initiator->post(h);
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (st.code() == xtel::status_code::in_progress &&
                   std::chrono::steady_clock::now() < give_up) {
                target->progress();
                st = initiator->poll(h);
            }
            REQUIRE(st.ok());
            REQUIRE(initiator->release(h).ok());
        }
        CHECK(remote == local);
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
