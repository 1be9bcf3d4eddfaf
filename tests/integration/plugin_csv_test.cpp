// The CSV exporter plugin (examples/plugins/csv), chosen through the NIXL_TELEMETRY_* variables
// alone, end to end: environment -> config -> telemetry<plugin_exporter> -> dlopen'd plugin ->
// file, and every row compared with the event that was recorded.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "plugin_test_support.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace plugin_csv_test {

using Catch::Matchers::Contains;
using xtel::test::log_capture;
using xtel::test::read_lines;
using xtel::test::scoped_env;
using xtel::test::temp_dir;

namespace {

struct row {
    std::uint64_t timestamp_us = 0;
    std::string category;
    std::string event_name;
    std::uint64_t value = 0;

    friend bool operator==(const row&, const row&) = default;
};

/// One line of RFC 4180 CSV (no line breaks inside fields) into its fields.
std::vector<std::string> split_csv(std::string_view line) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                fields.back() += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                fields.back() += c;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    return fields;
}

std::vector<row> parse_rows(const std::vector<std::string>& lines) {
    std::vector<row> rows;
    for (const auto& line : lines) {
        const auto f = split_csv(line);
        REQUIRE(f.size() == 4);
        rows.push_back(row{std::stoull(f[0]), f[1], f[2], std::stoull(f[3])});
    }
    return rows;
}

/// The variables an operator sets to send an agent's telemetry to the CSV plugin.
struct csv_environment {
    explicit csv_environment(std::optional<std::string> output_path)
        : output(xtel::env::output_path, std::move(output_path)) {}

    scoped_env enable{xtel::env::enable, "y"};
    scoped_env sets{"NIXL_TELEMETRY_METRIC_SET", "both"};
    scoped_env exporter{xtel::env::exporter, "csv"};
    scoped_env plugin_dir{xtel::env::plugin_dir, XTEL_CSV_PLUGIN_DIR};
    scoped_env interval{xtel::env::run_interval, "1"};
    scoped_env buffer_size{xtel::env::buffer_size, std::nullopt};
    scoped_env output;
};

constexpr std::uint64_t t0 = 1'700'000'000'000'000;

/// An agent's life as far as telemetry sees it: configured from the environment alone,
/// records memory registration, two transfers and a few other events, shuts down. When the
/// agent (xtel::agent, xfer_demo) is in, this is the one function to replace with it; the
/// expected rows below are what its transfers must produce.
void run_agent_from_environment(const std::string& agent_name) {
    const auto cfg = xtel::config::from_env();
    REQUIRE(cfg.exporters == std::vector<std::string>{"csv"});
    // The registry's choice for a name it does not compile in.
    xtel::plugin_telemetry t(cfg, agent_name);
    t.record_at(t0 + 1, xtel::category::memory, xtel::names::agent_memory_registered, 4096,
                xtel::value_kind::gauge);
    t.record_transfer(xtel::direction::tx, t0 + 2, 1 << 20, 3, 12, 345);
    // Long enough for the flusher (1 ms) to take a round in the middle.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.record_transfer(xtel::direction::rx, t0 + 3, 65536, 1, 7, 89);
    t.record_at(t0 + 4, xtel::category::custom, "queue,depth \"p99\"", 7);
    t.record_at(t0 + 5, xtel::category::backend, "ucx_retries",
                std::numeric_limits<std::uint64_t>::max(), xtel::value_kind::counter);
    t.record_at(t0 + 6, xtel::category::memory, xtel::names::agent_memory_deregistered, 4096,
                xtel::value_kind::gauge);
}

const std::vector<row> expected_rows = {
    {t0 + 1, "MEMORY", "agent_memory_registered", 4096},
    {t0 + 2, "TRANSFER", "agent_tx_bytes", 1 << 20},
    {t0 + 2, "TRANSFER", "agent_tx_requests_num", 3},
    {t0 + 2, "PERFORMANCE", "agent_xfer_time", 345},
    {t0 + 2, "PERFORMANCE", "agent_xfer_post_time", 12},
    {t0 + 3, "TRANSFER", "agent_rx_bytes", 65536},
    {t0 + 3, "TRANSFER", "agent_rx_requests_num", 1},
    {t0 + 3, "PERFORMANCE", "agent_xfer_time", 89},
    {t0 + 3, "PERFORMANCE", "agent_xfer_post_time", 7},
    {t0 + 4, "CUSTOM", "queue,depth \"p99\"", 7},
    {t0 + 5, "BACKEND", "ucx_retries", std::numeric_limits<std::uint64_t>::max()},
    {t0 + 6, "MEMORY", "agent_memory_deregistered", 4096},
};

const std::string header = "timestamp_us,category,event_name,value";

}  // namespace

}  // namespace plugin_csv_test

namespace Catch {
template <>
struct StringMaker<plugin_csv_test::row> {
    static std::string convert(const plugin_csv_test::row& r) {
        return std::to_string(r.timestamp_us) + "," + r.category + "," + r.event_name + "," +
               std::to_string(r.value);
    }
};
}  // namespace Catch

namespace plugin_csv_test {

TEST_CASE("the csv plugin, chosen through the environment alone, writes one exact row per event") {
    const temp_dir out;
    const csv_environment env(out.path().string());

    run_agent_from_environment("csv-agent");

    const auto lines = read_lines(out.path() / "csv-agent.csv");
    REQUIRE_FALSE(lines.empty());
    CHECK(lines.front() == header);
    CHECK(parse_rows({lines.begin() + 1, lines.end()}) == expected_rows);
}

TEST_CASE("the csv plugin quotes a name that holds a separator or a quote") {
    const temp_dir out;
    const csv_environment env(out.path().string());

    run_agent_from_environment("csv-agent");

    const auto lines = read_lines(out.path() / "csv-agent.csv");
    CHECK(std::count(lines.begin(), lines.end(),
                     std::to_string(t0 + 4) + ",CUSTOM,\"queue,depth \"\"p99\"\"\",7") == 1);
}

TEST_CASE("the csv plugin appends a second run to the file without a second header") {
    const temp_dir out;
    const csv_environment env(out.path().string());

    run_agent_from_environment("csv-agent");
    run_agent_from_environment("csv-agent");

    const auto lines = read_lines(out.path() / "csv-agent.csv");
    REQUIRE_FALSE(lines.empty());
    CHECK(lines.front() == header);
    auto twice = expected_rows;
    twice.insert(twice.end(), expected_rows.begin(), expected_rows.end());
    CHECK(parse_rows({lines.begin() + 1, lines.end()}) == twice);
}

TEST_CASE("the csv plugin without an output path is disabled with an error, and the agent runs") {
    const csv_environment env(std::nullopt);
    const log_capture logs;

    run_agent_from_environment("csv-agent");

    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Contains("libtelemetry_exporter_csv.so"));
    CHECK_THAT(errors[0], Contains("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH is not set"));
    CHECK_THAT(errors[0], Contains("this plugin is disabled"));
}

}  // namespace plugin_csv_test
