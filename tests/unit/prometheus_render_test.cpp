#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prometheus_fixtures.hpp"
#include "test_util.hpp"
#include "xtel/core/back_end.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace prometheus_render_test {

using prom_test::block;
using prom_test::exporter_under_test;
using prom_test::make;
using prom_test::tx_transfer;
using xtel::category;
using xtel::value_kind;

namespace {

constexpr std::string_view labels = R"(agent_name="a1",hostname="h")";

bool has_line(const std::string& text, std::string_view line) {
    return text.find("\n" + std::string(line) + "\n") != std::string::npos;
}

void replace_all(std::string& s, std::string_view what, std::string_view with) {
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) {
        s.replace(at, what.size(), with);
    }
}

}  // namespace

TEST_CASE("a new agent shows both sets of families at zero, sorted by name") {
    exporter_under_test t;
    // What an agent's UCX backend records as it starts (UCX 1.13.1): xtel_build_info's series.
    t.flush({make(category::backend, "ucx_version", 11301, value_kind::gauge)});
    std::string expected =
        R"(# HELP agent_errors_total Operations the agent answered with an error, by upstream NIXL's status
# TYPE agent_errors_total counter
agent_errors_total{agent_name="a1",hostname="h",status="not_posted"} 0
agent_errors_total{agent_name="a1",hostname="h",status="invalid_param"} 0
agent_errors_total{agent_name="a1",hostname="h",status="backend"} 0
agent_errors_total{agent_name="a1",hostname="h",status="not_found"} 0
agent_errors_total{agent_name="a1",hostname="h",status="mismatch"} 0
agent_errors_total{agent_name="a1",hostname="h",status="not_allowed"} 0
agent_errors_total{agent_name="a1",hostname="h",status="repost_active"} 0
agent_errors_total{agent_name="a1",hostname="h",status="unknown"} 0
agent_errors_total{agent_name="a1",hostname="h",status="not_supported"} 0
agent_errors_total{agent_name="a1",hostname="h",status="remote_disconnect"} 0
agent_errors_total{agent_name="a1",hostname="h",status="canceled"} 0
agent_errors_total{agent_name="a1",hostname="h",status="no_telemetry"} 0
# HELP agent_memory_deregistered_last_bytes Bytes of memory the last deregistration deregistered
# TYPE agent_memory_deregistered_last_bytes gauge
agent_memory_deregistered_last_bytes{agent_name="a1",hostname="h"} 0
# HELP agent_memory_deregistered_total Bytes of memory deregistered, summed over the agent's deregistrations
# TYPE agent_memory_deregistered_total counter
agent_memory_deregistered_total{agent_name="a1",hostname="h"} 0
# HELP agent_memory_registered_last_bytes Bytes of memory the last registration registered
# TYPE agent_memory_registered_last_bytes gauge
agent_memory_registered_last_bytes{agent_name="a1",hostname="h"} 0
# HELP agent_memory_registered_total Bytes of memory registered, summed over the agent's registrations (and allocations)
# TYPE agent_memory_registered_total counter
agent_memory_registered_total{agent_name="a1",hostname="h"} 0
# HELP agent_rx_bytes_total Bytes of the READs this agent initiated that completed; bytes a peer wrote into this agent's memory are not counted here (transfers are one-sided)
# TYPE agent_rx_bytes_total counter
agent_rx_bytes_total{agent_name="a1",hostname="h"} 0
# HELP agent_rx_last_bytes Bytes of the last completed READ this agent initiated
# TYPE agent_rx_last_bytes gauge
agent_rx_last_bytes{agent_name="a1",hostname="h"} 0
# HELP agent_rx_requests_num_total Completed READ requests this agent initiated
# TYPE agent_rx_requests_num_total counter
agent_rx_requests_num_total{agent_name="a1",hostname="h"} 0
# HELP agent_telemetry_events_dropped_total Telemetry records dropped because the recording thread's staging ring was full
# TYPE agent_telemetry_events_dropped_total counter
agent_telemetry_events_dropped_total{agent_name="a1",hostname="h"} 0
# HELP agent_tx_bytes_total Bytes of the WRITEs this agent initiated that completed; a peer's transfers into or out of this agent's memory are counted by the peer
# TYPE agent_tx_bytes_total counter
agent_tx_bytes_total{agent_name="a1",hostname="h"} 0
# HELP agent_tx_last_bytes Bytes of the last completed WRITE this agent initiated
# TYPE agent_tx_last_bytes gauge
agent_tx_last_bytes{agent_name="a1",hostname="h"} 0
# HELP agent_tx_requests_num_total Completed WRITE requests this agent initiated
# TYPE agent_tx_requests_num_total counter
agent_tx_requests_num_total{agent_name="a1",hostname="h"} 0
# HELP agent_xfer_post_time Microseconds spent in the post call of the last timed transfer this agent initiated
# TYPE agent_xfer_post_time gauge
agent_xfer_post_time{agent_name="a1",hostname="h"} 0
# HELP agent_xfer_post_time_total Microseconds spent in the post call, summed over the timed transfers this agent initiated
# TYPE agent_xfer_post_time_total counter
agent_xfer_post_time_total{agent_name="a1",hostname="h"} 0
# HELP agent_xfer_post_time_us Microseconds spent in the post call of the timed transfers this agent initiated
# TYPE agent_xfer_post_time_us histogram
agent_xfer_post_time_us_bucket{agent_name="a1",hostname="h",le="10"} 0
agent_xfer_post_time_us_bucket{agent_name="a1",hostname="h",le="100"} 0
agent_xfer_post_time_us_bucket{agent_name="a1",hostname="h",le="+Inf"} 0
agent_xfer_post_time_us_sum{agent_name="a1",hostname="h"} 0
agent_xfer_post_time_us_count{agent_name="a1",hostname="h"} 0
# HELP agent_xfer_time Microseconds from post to completion of the last timed transfer this agent initiated
# TYPE agent_xfer_time gauge
agent_xfer_time{agent_name="a1",hostname="h"} 0
# HELP agent_xfer_time_total Microseconds from post to completion, summed over the timed transfers this agent initiated
# TYPE agent_xfer_time_total counter
agent_xfer_time_total{agent_name="a1",hostname="h"} 0
# HELP agent_xfer_time_us Microseconds from post to completion of the timed transfers this agent initiated
# TYPE agent_xfer_time_us histogram
agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="10"} 0
agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="100"} 0
agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="+Inf"} 0
agent_xfer_time_us_sum{agent_name="a1",hostname="h"} 0
agent_xfer_time_us_count{agent_name="a1",hostname="h"} 0
# HELP xtel_agent_info 1: the agent's backend and process; its transports are xtel_transport_lanes.
# TYPE xtel_agent_info gauge
xtel_agent_info{agent_name="a1",backend="ucx",pid="@PID@"} 1
# HELP xtel_build_info 1: the xtel and UCX versions this agent runs.
# TYPE xtel_build_info gauge
xtel_build_info{agent_name="a1",version="0.1.0",ucx_version="1.13.1"} 1
# HELP xtel_connections Remote agents whose metadata this agent loaded, usable now; peers that reach this agent without its loading theirs are not known to it.
# TYPE xtel_connections gauge
xtel_connections{agent_name="a1"} 0
# HELP xtel_connections_closed_total Connections to remote agents closed.
# TYPE xtel_connections_closed_total counter
xtel_connections_closed_total{agent_name="a1"} 0
# HELP xtel_connections_opened_total Connections to remote agents opened.
# TYPE xtel_connections_opened_total counter
xtel_connections_opened_total{agent_name="a1"} 0
# HELP xtel_errors_total Operations the agent answered with an error, by the error's kind (xtel::status_code).
# TYPE xtel_errors_total counter
xtel_errors_total{agent_name="a1",kind="invalid_argument"} 0
xtel_errors_total{agent_name="a1",kind="not_found"} 0
xtel_errors_total{agent_name="a1",kind="busy"} 0
xtel_errors_total{agent_name="a1",kind="not_supported"} 0
xtel_errors_total{agent_name="a1",kind="bad_metadata"} 0
xtel_errors_total{agent_name="a1",kind="remote_disconnected"} 0
xtel_errors_total{agent_name="a1",kind="timed_out"} 0
xtel_errors_total{agent_name="a1",kind="backend_error"} 0
# HELP xtel_memory_deregistrations_total Memory deregistrations that succeeded; what the agent deregisters as it stops counts as one.
# TYPE xtel_memory_deregistrations_total counter
xtel_memory_deregistrations_total{agent_name="a1"} 0
# HELP xtel_memory_registered_bytes Bytes of memory registered now: what peers that loaded this agent's metadata may read and write.
# TYPE xtel_memory_registered_bytes gauge
xtel_memory_registered_bytes{agent_name="a1"} 0
# HELP xtel_memory_registrations_total Memory registrations (and allocations) that succeeded.
# TYPE xtel_memory_registrations_total counter
xtel_memory_registrations_total{agent_name="a1"} 0
# HELP xtel_metrics_series_folded_total Updates folded into a family's overflow series (its labels "other") because the family had reached its limit of series.
# TYPE xtel_metrics_series_folded_total counter
xtel_metrics_series_folded_total{agent_name="a1",family="xtel_transfer_bytes_total"} 0
xtel_metrics_series_folded_total{agent_name="a1",family="xtel_transfer_requests_total"} 0
xtel_metrics_series_folded_total{agent_name="a1",family="xtel_transfer_duration_seconds"} 0
xtel_metrics_series_folded_total{agent_name="a1",family="xtel_transfer_post_duration_seconds"} 0
xtel_metrics_series_folded_total{agent_name="a1",family="xtel_notified_transfers_total"} 0
xtel_metrics_series_folded_total{agent_name="a1",family="xtel_notified_bytes_total"} 0
# HELP xtel_telemetry_events_dropped_total Records dropped because a per-thread staging ring was full.
# TYPE xtel_telemetry_events_dropped_total counter
xtel_telemetry_events_dropped_total{agent_name="a1"} 0
# HELP xtel_telemetry_events_unmapped_total Events the agent's metric model mapped to no family: a value kind the family's type does not take, a name that collides with another family, or a name past the limit of distinct names.
# TYPE xtel_telemetry_events_unmapped_total counter
xtel_telemetry_events_unmapped_total{agent_name="a1"} 0
# HELP xtel_telemetry_export_errors_total Exporter calls that threw; the exporter goes on with the next batch.
# TYPE xtel_telemetry_export_errors_total counter
xtel_telemetry_export_errors_total{agent_name="a1"} 0
# HELP xtel_ucx_endpoint_errors_total Errors UCX reported on an endpoint (a peer that went away).
# TYPE xtel_ucx_endpoint_errors_total counter
xtel_ucx_endpoint_errors_total{agent_name="a1"} 0
)";
    replace_all(expected, "@PID@", std::to_string(::getpid()));
    // The process metrics (the endpoint's, without agent_name) sort between the two sets;
    // their values are the process's own (process_metrics_test.cpp checks them).
    std::string text = t.exporter.scrape();
    const auto from = text.find("# HELP process_");
    const auto to = text.find("# HELP xtel_");
    REQUIRE(from != std::string::npos);
    REQUIRE(to > from);
    const std::string process = text.substr(from, to - from);
    text.erase(from, to - from);
    CHECK(text == expected);
    for (const auto* family : {"process_cpu_seconds_total", "process_max_fds", "process_open_fds",
                               "process_resident_memory_bytes", "process_start_time_seconds",
                               "process_virtual_memory_bytes"}) {
        CHECK(process.find(std::string("\n") + family + " ") != std::string::npos);
    }
}

TEST_CASE("transfers add to the byte and request counters") {
    exporter_under_test t;
    t.flush(tx_transfer(4096, 2, 30));
    t.flush(tx_transfer(1000, 2, 30));
    t.flush(prom_test::transfer(xtel::direction::rx, 777, 3, 1, 1));
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 5096)"));
    CHECK(has_line(text, R"(agent_tx_requests_num_total{agent_name="a1",hostname="h"} 2)"));
    CHECK(has_line(text, R"(agent_rx_bytes_total{agent_name="a1",hostname="h"} 777)"));
    CHECK(has_line(text, R"(agent_rx_requests_num_total{agent_name="a1",hostname="h"} 3)"));
}

TEST_CASE("transfer times fill cumulative histogram buckets with their sum and count") {
    exporter_under_test t;
    // 10 lands in le="10" (bounds are inclusive), 11 and 100 in le="100", 5000 only in +Inf.
    for (const std::uint64_t us : {3, 10, 11, 100, 5000}) {
        t.flush(tx_transfer(1, 1, us));
    }
    const auto text = t.exporter.scrape();
    CHECK(block(text, "agent_xfer_time_us_bucket", "agent_xfer_time_us_count") ==
          R"(agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="10"} 2
agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="100"} 4
agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="+Inf"} 5
agent_xfer_time_us_sum{agent_name="a1",hostname="h"} 5124
agent_xfer_time_us_count{agent_name="a1",hostname="h"} 5
)");
    // The same observations in seconds, by operation and peer (the records name none).
    CHECK(
        block(text, "xtel_transfer_duration_seconds_bucket",
              "xtel_transfer_duration_seconds_count") ==
        R"(xtel_transfer_duration_seconds_bucket{agent_name="a1",operation="write",remote_agent="unknown",le="0.00001"} 2
xtel_transfer_duration_seconds_bucket{agent_name="a1",operation="write",remote_agent="unknown",le="0.0001"} 4
xtel_transfer_duration_seconds_bucket{agent_name="a1",operation="write",remote_agent="unknown",le="+Inf"} 5
xtel_transfer_duration_seconds_sum{agent_name="a1",operation="write",remote_agent="unknown"} 0.005124
xtel_transfer_duration_seconds_count{agent_name="a1",operation="write",remote_agent="unknown"} 5
)");
    CHECK(has_line(text, R"(agent_xfer_time_total{agent_name="a1",hostname="h"} 5124)"));
    CHECK(has_line(text, R"(agent_xfer_time{agent_name="a1",hostname="h"} 5000)"));
    CHECK(has_line(text, R"(agent_xfer_post_time_total{agent_name="a1",hostname="h"} 5)"));
    CHECK(has_line(text, R"(agent_xfer_post_time{agent_name="a1",hostname="h"} 1)"));
    CHECK(has_line(text, R"(agent_tx_last_bytes{agent_name="a1",hostname="h"} 1)"));
}

TEST_CASE("histogram bounds that are not whole numbers keep their fraction in le") {
    exporter_under_test t("a1", {0.5, 2.25, 1e6});
    t.flush(tx_transfer(1, 0, 1));
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="0.5"} 0)"));
    CHECK(has_line(text, R"(agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="2.25"} 1)"));
    CHECK(has_line(text,
                   R"(agent_xfer_time_us_bucket{agent_name="a1",hostname="h",le="1000000"} 1)"));
}

TEST_CASE("memory levels become NIXL's totals and last bytes and xtel's level and counts") {
    exporter_under_test t;
    // As basic_agent sends them: bytes registered now; bytes deregistered since the start.
    // Register 1 MiB, then 4 KiB; deregister the 1 MiB (the level drops, then deregistered
    // rises).
    t.flush({make(category::memory, "agent_memory_registered", 1 << 20, value_kind::gauge)});
    t.flush({make(category::memory, "agent_memory_registered", (1 << 20) + 4096, value_kind::gauge),
             make(category::memory, "agent_memory_registered", 4096, value_kind::gauge),
             make(category::memory, "agent_memory_deregistered", 1 << 20, value_kind::gauge)});
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(agent_memory_registered_total{agent_name="a1",hostname="h"} 1052672)"));
    CHECK(
        has_line(text, R"(agent_memory_registered_last_bytes{agent_name="a1",hostname="h"} 4096)"));
    CHECK(
        has_line(text, R"(agent_memory_deregistered_total{agent_name="a1",hostname="h"} 1048576)"));
    CHECK(has_line(
        text, R"(agent_memory_deregistered_last_bytes{agent_name="a1",hostname="h"} 1048576)"));
    CHECK(has_line(text, R"(xtel_memory_registered_bytes{agent_name="a1"} 4096)"));
    CHECK(has_line(text, R"(xtel_memory_registrations_total{agent_name="a1"} 2)"));
    CHECK(has_line(text, R"(xtel_memory_deregistrations_total{agent_name="a1"} 1)"));
}

TEST_CASE("memory sent as NIXL does, one operation's bytes per event, adds up alike") {
    exporter_under_test t;
    t.flush({make(category::memory, "agent_memory_registered", 100, value_kind::counter),
             make(category::memory, "agent_memory_registered", 50, value_kind::counter),
             make(category::memory, "agent_memory_deregistered", 30, value_kind::counter)});
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(agent_memory_registered_total{agent_name="a1",hostname="h"} 150)"));
    CHECK(has_line(text, R"(agent_memory_registered_last_bytes{agent_name="a1",hostname="h"} 50)"));
    CHECK(has_line(text, R"(agent_memory_deregistered_total{agent_name="a1",hostname="h"} 30)"));
    CHECK(has_line(text, R"(xtel_memory_registered_bytes{agent_name="a1"} 120)"));
    CHECK(has_line(text, R"(xtel_memory_registrations_total{agent_name="a1"} 2)"));
    CHECK(has_line(text, R"(xtel_memory_deregistrations_total{agent_name="a1"} 1)"));
}

TEST_CASE("error events count under NIXL's status and xtel's kind") {
    exporter_under_test t;
    t.flush({make(category::error, "agent_error_remote_disconnected", 1, value_kind::counter),
             make(category::error, "agent_error_remote_disconnected", 1, value_kind::counter),
             make(category::error, "agent_error_bad_metadata", 1, value_kind::counter),
             make(category::error, "agent_error_invalid_argument", 1, value_kind::counter),
             make(category::error, "agent_error_timed_out", 1, value_kind::counter)});
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(xtel_errors_total{agent_name="a1",kind="remote_disconnected"} 2)"));
    CHECK(has_line(text, R"(xtel_errors_total{agent_name="a1",kind="bad_metadata"} 1)"));
    CHECK(has_line(text, R"(xtel_errors_total{agent_name="a1",kind="busy"} 0)"));
    CHECK(has_line(
        text, R"(agent_errors_total{agent_name="a1",hostname="h",status="remote_disconnect"} 2)"));
    // bad_metadata and invalid_argument are both NIXL's invalid_param.
    CHECK(has_line(text,
                   R"(agent_errors_total{agent_name="a1",hostname="h",status="invalid_param"} 2)"));
    CHECK(
        has_line(text, R"(agent_errors_total{agent_name="a1",hostname="h",status="canceled"} 1)"));
    CHECK(text.find("agent_error_") == std::string::npos);
}

TEST_CASE(
    "NIXL events xtel has no kind for are served by NIXL's kind, its errors by NIXL's status") {
    exporter_under_test t;
    // As xtel's NIXL plug-in names them (nixl/event_mapping.cpp).
    t.flush({make(category::error, "nixl_unmapped_not_posted", 2, value_kind::counter),
             make(category::error, "nixl_unmapped_no_telemetry", 1, value_kind::counter),
             make(category::system, "nixl_unmapped_undefined", 3, value_kind::counter)});
    const auto text = t.exporter.scrape();
    CHECK(
        has_line(text, R"(xtel_nixl_events_unmapped_total{agent_name="a1",type="not_posted"} 2)"));
    CHECK(has_line(text,
                   R"(xtel_nixl_events_unmapped_total{agent_name="a1",type="no_telemetry"} 1)"));
    CHECK(has_line(text, R"(xtel_nixl_events_unmapped_total{agent_name="a1",type="undefined"} 3)"));
    CHECK(has_line(text,
                   R"(agent_errors_total{agent_name="a1",hostname="h",status="not_posted"} 2)"));
    CHECK(has_line(text,
                   R"(agent_errors_total{agent_name="a1",hostname="h",status="no_telemetry"} 1)"));
    CHECK(
        has_line(text, R"(agent_errors_total{agent_name="a1",hostname="h",status="mismatch"} 0)"));
    CHECK(text.find("\nnixl_unmapped_") == std::string::npos);  // no family of the event's name
}

TEST_CASE("connections, transports and what the agent is go to their own families") {
    exporter_under_test t;
    t.flush({make(category::connection, "agent_connect", 1, value_kind::counter),
             make(category::connection, "agent_connections", 1, value_kind::gauge),
             make(category::backend, "ucx_tl_posix", 2, value_kind::gauge),
             make(category::backend, "ucx_tl_tcp", 1, value_kind::gauge),
             make(category::connection, "agent_disconnect", 1, value_kind::counter),
             make(category::connection, "agent_connections", 0, value_kind::gauge),
             make(category::system, "agent_start", 4242, value_kind::sample),
             make(category::backend, "ucx_version", 11301, value_kind::gauge),
             make(category::backend, "ucx_endpoint_error", 1, value_kind::counter)});
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(xtel_connections_opened_total{agent_name="a1"} 1)"));
    CHECK(has_line(text, R"(xtel_connections_closed_total{agent_name="a1"} 1)"));
    CHECK(has_line(text, R"(xtel_connections{agent_name="a1"} 0)"));
    CHECK(has_line(text, R"(xtel_transport_lanes{agent_name="a1",transport="posix"} 2)"));
    CHECK(has_line(text, R"(xtel_transport_lanes{agent_name="a1",transport="tcp"} 1)"));
    CHECK(has_line(text, R"(xtel_ucx_endpoint_errors_total{agent_name="a1"} 1)"));
    // agent_start gives the start time (its timestamp: 1 µs in this fixture), not a family of
    // its own; ucx_version is in build_info.
    CHECK(has_line(text, R"(xtel_agent_start_time_seconds{agent_name="a1"} 0.000001)"));
    CHECK(text.find("\nagent_start") == std::string::npos);
    CHECK(text.find("ucx_version ") == std::string::npos);
    CHECK(text.find("ucx_tl_") == std::string::npos);
    CHECK(has_line(text, R"(xtel_telemetry_events_unmapped_total{agent_name="a1"} 0)"));
}

TEST_CASE("xtel_build_info has no series until the backend records its UCX version") {
    exporter_under_test t;
    CHECK(t.exporter.scrape().find("\nxtel_build_info{") == std::string::npos);
}

TEST_CASE(
    "the first ucx_version event gives xtel_build_info its one series, as major.minor.release") {
    exporter_under_test t;
    t.flush({make(category::backend, "ucx_version", 21405, value_kind::gauge)});
    t.flush({make(category::backend, "ucx_version", 11301, value_kind::gauge)});
    const auto text = t.exporter.scrape();
    CHECK(has_line(text,
                   R"(xtel_build_info{agent_name="a1",version="0.1.0",ucx_version="2.14.5"} 1)"));
    CHECK(text.find("ucx_version=\"1.13.1\"") == std::string::npos);
}

TEST_CASE("dropped events add to the dropped-events counter") {
    exporter_under_test t;
    t.flush({make(category::system, "telemetry_events_dropped", 7, value_kind::counter)});
    t.flush({make(category::system, "telemetry_events_dropped", 5, value_kind::counter)});
    const auto text = t.exporter.scrape();
    CHECK(
        has_line(text, R"(agent_telemetry_events_dropped_total{agent_name="a1",hostname="h"} 12)"));
    CHECK(has_line(text, R"(xtel_telemetry_events_dropped_total{agent_name="a1"} 12)"));
}

TEST_CASE("other events become a counter, gauge or summary by their value kind") {
    exporter_under_test t;
    t.flush({make(category::backend, "ucx_retries", 2, value_kind::counter),
             make(category::backend, "ucx_retries", 3, value_kind::counter),
             make(category::connection, "queue-depth", 9, value_kind::gauge),
             make(category::custom, "app.latency", 40, value_kind::sample),
             make(category::custom, "app.latency", 2, value_kind::sample)});
    const auto text = t.exporter.scrape();
    CHECK(
        block(text, "# HELP ucx_retries_total", "ucx_retries_total{") ==
        R"(# HELP ucx_retries_total BACKEND event 'ucx_retries' (not one xtel knows): the sum of its increments.
# TYPE ucx_retries_total counter
ucx_retries_total{agent_name="a1"} 5
)");
    CHECK(
        block(text, "# HELP queue_depth", "queue_depth{") ==
        R"(# HELP queue_depth CONNECTION event 'queue-depth' (not one xtel knows): the last level set.
# TYPE queue_depth gauge
queue_depth{agent_name="a1"} 9
)");
    CHECK(
        block(text, "# HELP app_latency", "app_latency_count{") ==
        R"(# HELP app_latency CUSTOM event 'app.latency' (not one xtel knows): the sum and count of its samples.
# TYPE app_latency summary
app_latency_sum{agent_name="a1"} 42
app_latency_count{agent_name="a1"} 2
)");
}

TEST_CASE("an event whose kind its family does not take is ignored and counted") {
    exporter_under_test t;
    t.flush({make(category::backend, "ucx_retries", 2, value_kind::counter),
             make(category::backend, "ucx_retries", 9, value_kind::gauge),
             make(category::system, "telemetry_events_dropped", 5, value_kind::gauge)});
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(ucx_retries_total{agent_name="a1"} 2)"));
    CHECK(has_line(text, R"(xtel_telemetry_events_dropped_total{agent_name="a1"} 0)"));
    CHECK(has_line(text, R"(xtel_telemetry_events_unmapped_total{agent_name="a1"} 2)"));
}

TEST_CASE("a name that would collide with another family's lines is ignored and counted") {
    exporter_under_test t;
    t.flush({make(category::custom, "agent_xfer_time_us_count", 1, value_kind::gauge),
             make(category::custom, "agent_tx_bytes_total", 1, value_kind::counter)});
    const auto text = t.exporter.scrape();
    CHECK(text.find("# TYPE agent_xfer_time_us_count") == std::string::npos);
    CHECK(has_line(text, R"(agent_xfer_time_us_count{agent_name="a1",hostname="h"} 0)"));
    CHECK(has_line(text, R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 0)"));
    CHECK(has_line(text, R"(xtel_telemetry_events_unmapped_total{agent_name="a1"} 2)"));
}

TEST_CASE("event names outside the metric name alphabet are mapped onto it") {
    exporter_under_test t;
    t.flush({make(category::custom, "9lives-x", 1, value_kind::gauge)});
    CHECK(has_line(t.exporter.scrape(), R"(_9lives_x{agent_name="a1"} 1)"));
}

TEST_CASE("label values are escaped and invalid UTF-8 is replaced") {
    xtel::config cfg;
    auto model = exporter_under_test::model({10});
    model.hostname = "host\"q";
    const std::string agent = "a\\b\nc\xff";
    const xtel::prometheus_exporter e(
        {{cfg, agent}, std::make_shared<xtel::metrics::agent_metrics>(agent, model)},
        exporter_under_test::settings("127.0.0.1:0"));
    CHECK(e.scrape().find("{agent_name=\"a\\\\b\\nc\xEF\xBF\xBD\",hostname=\"host\\\"q\"} 0\n") !=
          std::string::npos);
}

TEST_CASE("a scrape shows a flush round only once it has ended") {
    exporter_under_test t;
    t.send(tx_transfer(64, 1, 1));
    CHECK(has_line(t.exporter.scrape(), R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 0)"));
    t.end_round();
    CHECK(
        has_line(t.exporter.scrape(), R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 64)"));
}

TEST_CASE("agents on one address share one endpoint and each family is listed once") {
    exporter_under_test a("agent_b");
    exporter_under_test b("agent_a");
    REQUIRE(a.exporter.active());
    REQUIRE(b.exporter.active());
    CHECK(a.exporter.port() == b.exporter.port());
    a.flush(tx_transfer(10, 1, 1));
    b.flush(tx_transfer(20, 1, 1));
    const auto text = a.exporter.scrape();
    CHECK(text == b.exporter.scrape());
    CHECK(
        block(text, "# HELP agent_tx_bytes_total", "agent_tx_bytes_total{agent_name=\"agent_b\"") ==
        R"(# HELP agent_tx_bytes_total Bytes of the WRITEs this agent initiated that completed; a peer's transfers into or out of this agent's memory are counted by the peer
# TYPE agent_tx_bytes_total counter
agent_tx_bytes_total{agent_name="agent_a",hostname="h"} 20
agent_tx_bytes_total{agent_name="agent_b",hostname="h"} 10
)");
}

TEST_CASE("an agent leaves the shared endpoint when its exporter goes") {
    exporter_under_test a("stays");
    {
        exporter_under_test b("leaves");
        CHECK(a.exporter.scrape().find(R"(agent_name="leaves")") != std::string::npos);
    }
    CHECK(a.exporter.scrape().find(R"(agent_name="leaves")") == std::string::npos);
    CHECK(a.exporter.scrape().find(R"(agent_name="stays")") != std::string::npos);
}

TEST_CASE("a second agent of the same name on one endpoint is refused and logged") {
    const prom_test::log_capture logs;
    exporter_under_test first("twin");
    exporter_under_test second("twin");
    CHECK(first.exporter.active());
    CHECK_FALSE(second.exporter.active());
    CHECK_FALSE(logs.find(xtel::log_level::error, "agent 'twin'").empty());
    // The back end counts what a refused sink loses: a timed transfer's four events.
    const auto cfg = xtel_test::enabled_config({"prometheus"}, first.exporter.address());
    const xtel::label_table labels;
    xtel::back_end<xtel::prometheus_exporter> refused({cfg, "twin"}, labels, 64);
    CHECK(refused.get<xtel::prometheus_exporter>().disabled());
    refused.take(std::span<const xtel::transfer_record>(tx_transfer(10, 1, 1).transfers));
    refused.end_round(0);
    CHECK(refused.events_lost(0) == 4);
    CHECK(refused.stats().events_lost == 4);
}

TEST_CASE("an agent whose family of a shared name has another type is left out of that family") {
    exporter_under_test a("agent_a");
    exporter_under_test b("agent_b");
    a.flush({make(category::custom, "depth", 3, value_kind::gauge)});
    b.flush({make(category::custom, "depth", 40, value_kind::sample)});
    const auto text = a.exporter.scrape();
    CHECK(block(text, "# HELP depth", "depth{") ==
          R"(# HELP depth CUSTOM event 'depth' (not one xtel knows): the last level set.
# TYPE depth gauge
depth{agent_name="agent_a"} 3
)");
    CHECK(text.find("depth_sum") == std::string::npos);
    CHECK(text.find("depth_count") == std::string::npos);
}

TEST_CASE("timed transfer records fill the histograms while untimed and failed ones do not") {
    exporter_under_test t;
    auto round = tx_transfer(10, 2, 30);
    auto untimed = round.transfers[0];
    untimed.timed = false;
    untimed.post_us = 0;
    untimed.xfer_us = 0;
    auto failed = round.transfers[0];
    failed.attrs.status = xtel::transfer_status::error;
    round.transfers.push_back(untimed);
    round.transfers.push_back(failed);
    t.flush(round);
    const auto text = t.exporter.scrape();
    CHECK(has_line(text, R"(agent_xfer_time_us_count{agent_name="a1",hostname="h"} 1)"));
    CHECK(has_line(text, R"(agent_xfer_time_us_sum{agent_name="a1",hostname="h"} 30)"));
    CHECK(has_line(text, R"(agent_xfer_post_time_us_sum{agent_name="a1",hostname="h"} 2)"));
    CHECK(has_line(
        text,
        R"(xtel_transfer_post_duration_seconds_count{agent_name="a1",operation="write",remote_agent="unknown"} 1)"));
    CHECK(has_line(text, R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 20)"));
    CHECK(has_line(text, R"(agent_tx_requests_num_total{agent_name="a1",hostname="h"} 2)"));
}

// ---- the renderer on its own: OpenMetrics 1.0.0 next to the text format 0.0.4 ---------------

namespace {

using xtel::metrics::exposition;
using xtel::metrics::family_snapshot;
using xtel::metrics::metric_type;
using snapshot_ptr = std::shared_ptr<const xtel::metrics::snapshot>;

snapshot_ptr agent_snapshot(std::string agent, std::vector<family_snapshot> families) {
    auto s = std::make_shared<xtel::metrics::snapshot>();
    s->labels = {{"agent_name", std::move(agent)}};
    s->families = std::move(families);
    return s;
}

std::string rendered(const std::vector<snapshot_ptr>& snapshots, exposition format) {
    std::string out;
    xtel::metrics::render(snapshots, out, format);
    return out;
}

/// xtel_kv_read_seconds: a histogram of microseconds shown as seconds, bounds 1 ms and 10 ms.
family_snapshot read_seconds(std::vector<xtel::metrics::exemplar> exemplars) {
    family_snapshot f;
    f.spec.name = "xtel_kv_read_seconds";
    f.spec.help = "Seconds a KV read took.";
    f.spec.type = metric_type::histogram;
    f.spec.label_names = {"peer"};
    f.spec.decimals = 6;
    f.spec.bounds = {1000, 10000};
    f.spec.unit = "seconds";
    xtel::metrics::series s;
    s.label_values = {"decode-0"};
    s.buckets = {17, 3};
    s.count = 21;
    s.sum = 52'650;
    s.exemplars = std::move(exemplars);
    f.series.push_back(std::move(s));
    return f;
}

family_snapshot counter_family(std::string name, std::string help, std::uint64_t value) {
    family_snapshot f;
    f.spec.name = std::move(name);
    f.spec.help = std::move(help);
    f.spec.type = metric_type::counter;
    xtel::metrics::series s;
    s.value = value;
    f.series.push_back(std::move(s));
    return f;
}

}  // namespace

TEST_CASE("openmetrics names a counter family without _total and its samples keep it") {
    const auto text =
        rendered({agent_snapshot("a1", {counter_family("xtel_bytes_total", "Bytes moved.", 4096)})},
                 exposition::openmetrics);
    CHECK(text == R"(# TYPE xtel_bytes counter
# HELP xtel_bytes Bytes moved.
xtel_bytes_total{agent_name="a1"} 4096
# EOF
)");
}

TEST_CASE("the text format keeps a counter family's _total and has no EOF line") {
    const auto text =
        rendered({agent_snapshot("a1", {counter_family("xtel_bytes_total", "Bytes moved.", 4096)})},
                 exposition::text);
    CHECK(text == R"(# HELP xtel_bytes_total Bytes moved.
# TYPE xtel_bytes_total counter
xtel_bytes_total{agent_name="a1"} 4096
)");
}

TEST_CASE("openmetrics buckets carry their exemplars with scaled values and timestamps") {
    std::vector<xtel::metrics::exemplar> ex(3);
    ex[0] = {"request_id", "kv-12", 450, 1'732'460'000'123'456};
    ex[2] = {"request_id", "kv-99", 31'200, 1'732'460'001'000'000};  // the +Inf bucket's
    const auto text = rendered({agent_snapshot("a1", {read_seconds(ex)})}, exposition::openmetrics);
    CHECK(text == R"(# TYPE xtel_kv_read_seconds histogram
# UNIT xtel_kv_read_seconds seconds
# HELP xtel_kv_read_seconds Seconds a KV read took.
xtel_kv_read_seconds_bucket{agent_name="a1",peer="decode-0",le="0.001"} 17 # {request_id="kv-12"} 0.000450 1732460000.123456
xtel_kv_read_seconds_bucket{agent_name="a1",peer="decode-0",le="0.01"} 20
xtel_kv_read_seconds_bucket{agent_name="a1",peer="decode-0",le="+Inf"} 21 # {request_id="kv-99"} 0.031200 1732460001.000000
xtel_kv_read_seconds_sum{agent_name="a1",peer="decode-0"} 0.052650
xtel_kv_read_seconds_count{agent_name="a1",peer="decode-0"} 21
# EOF
)");
}

TEST_CASE("the text format shows neither exemplars nor units and scales bucket bounds") {
    std::vector<xtel::metrics::exemplar> ex(3);
    ex[0] = {"request_id", "kv-12", 450, 1'732'460'000'123'456};
    const auto text = rendered({agent_snapshot("a1", {read_seconds(ex)})}, exposition::text);
    CHECK(text == R"(# HELP xtel_kv_read_seconds Seconds a KV read took.
# TYPE xtel_kv_read_seconds histogram
xtel_kv_read_seconds_bucket{agent_name="a1",peer="decode-0",le="0.001"} 17
xtel_kv_read_seconds_bucket{agent_name="a1",peer="decode-0",le="0.01"} 20
xtel_kv_read_seconds_bucket{agent_name="a1",peer="decode-0",le="+Inf"} 21
xtel_kv_read_seconds_sum{agent_name="a1",peer="decode-0"} 0.052650
xtel_kv_read_seconds_count{agent_name="a1",peer="decode-0"} 21
)");
}

TEST_CASE("openmetrics leaves out exemplars it cannot carry") {
    std::vector<xtel::metrics::exemplar> ex(3);
    ex[0] = {"request id", "kv-1", 450, 1};                  // not a label name
    ex[1] = {"request_id", std::string(119, 'x'), 2000, 1};  // 129 characters with its name
    ex[2] = {"request_id", "", 20000, 1};                    // none
    const auto text = rendered({agent_snapshot("a1", {read_seconds(ex)})}, exposition::openmetrics);
    CHECK(text.find(" # {") == std::string::npos);
    ex[1].label_value.pop_back();  // 128: the limit itself is allowed
    ex[1].timestamp_us = 0;        // unknown: no timestamp
    const auto at_limit =
        rendered({agent_snapshot("a1", {read_seconds(ex)})}, exposition::openmetrics);
    CHECK(at_limit.find("le=\"0.01\"} 20 # {request_id=\"" + std::string(118, 'x') +
                        "\"} 0.002000\n") != std::string::npos);
}

TEST_CASE(
    "openmetrics exemplars show the transfer's trace and span ids, then its own label if it fits") {
    constexpr std::array<std::uint8_t, 16> trace = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
                                                    0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};
    constexpr std::array<std::uint8_t, 8> span = {0xe4, 0xa1, 0xf0, 0x6c, 0x52, 0xb3, 0x9d, 0x87};
    const std::string tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    std::vector<xtel::metrics::exemplar> ex(3);
    ex[0] = {"request_id", tp, 450, 0, trace, span};                     // 63 + 65: exactly 128
    ex[1] = {"request_id", std::string(56, 'r'), 2000, 0, trace, span};  // 129: ids only
    ex[2] = {"request_id", "req-7", 20000, 0, trace, {}};                // a trace, no span written
    const auto text = rendered({agent_snapshot("a1", {read_seconds(ex)})}, exposition::openmetrics);
    CHECK(text.find("le=\"0.001\"} 17 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\","
                    "span_id=\"e4a1f06c52b39d87\",request_id=\"" +
                    tp + "\"} 0.000450\n") != std::string::npos);
    CHECK(text.find("le=\"0.01\"} 20 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\","
                    "span_id=\"e4a1f06c52b39d87\"} 0.002000\n") != std::string::npos);
    CHECK(text.find("le=\"+Inf\"} 21 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\","
                    "request_id=\"req-7\"} 0.020000\n") != std::string::npos);
    // One character less and the request id fits beside the ids.
    ex[1].label_value.pop_back();
    const auto fits = rendered({agent_snapshot("a1", {read_seconds(ex)})}, exposition::openmetrics);
    CHECK(fits.find("span_id=\"e4a1f06c52b39d87\",request_id=\"" + std::string(55, 'r') +
                    "\"} 0.002000\n") != std::string::npos);
}

TEST_CASE("openmetrics escapes label values, exemplar values and HELP text") {
    auto f = counter_family("odd_total", "A \"quoted\" \\ help\nline.", 1);
    f.spec.label_names = {"peer"};
    f.series[0].label_values = {"a\"b\\c\nd\xff"};
    auto h = read_seconds({{"request_id", "q\"\n", 1, 0}, {}, {}});
    const auto text = rendered({agent_snapshot("x\"y", {h, f})}, exposition::openmetrics);
    CHECK(text.find("# HELP odd A \\\"quoted\\\" \\\\ help\\nline.\n") != std::string::npos);
    CHECK(text.find("odd_total{agent_name=\"x\\\"y\",peer=\"a\\\"b\\\\c\\nd\xEF\xBF\xBD\"} 1\n") !=
          std::string::npos);
    CHECK(text.find("} 17 # {request_id=\"q\\\"\\n\"} 0.000001\n") != std::string::npos);
}

TEST_CASE("openmetrics of no families is only the EOF line") {
    CHECK(rendered({}, exposition::openmetrics) == "# EOF\n");
    CHECK(rendered({agent_snapshot("a1", {})}, exposition::openmetrics) == "# EOF\n");
    CHECK(rendered({}, exposition::text).empty());
}

TEST_CASE("openmetrics shows a counter whose family name a gauge takes as unknown, same samples") {
    family_snapshot gauge;
    gauge.spec.name = "depth";
    gauge.spec.type = metric_type::gauge;
    gauge.series.emplace_back();
    const auto snap = agent_snapshot("a1", {gauge, counter_family("depth_total", "Depth.", 3)});
    const auto om = rendered({snap}, exposition::openmetrics);
    CHECK(om == R"(# TYPE depth gauge
# HELP depth 
depth{agent_name="a1"} 0
# TYPE depth_total unknown
# HELP depth_total Depth.
depth_total{agent_name="a1"} 3
# EOF
)");
    CHECK(rendered({snap}, exposition::text).find("depth_total{agent_name=\"a1\"} 3\n") !=
          std::string::npos);
}

TEST_CASE("openmetrics leaves out, and counts, a family of one agent whose names another's take") {
    // Each agent's store would refuse the pair; two agents' snapshots can still hold it.
    const auto lat = read_seconds({});
    family_snapshot created;
    created.spec.name = "xtel_kv_read_seconds_created";
    created.spec.type = metric_type::gauge;
    created.series.emplace_back();
    const std::vector<snapshot_ptr> both{agent_snapshot("a1", {lat}),
                                         agent_snapshot("a2", {created})};
    std::string om;
    CHECK(xtel::metrics::render(both, om, exposition::openmetrics) == 1);
    CHECK(om.find("xtel_kv_read_seconds_created") == std::string::npos);
    CHECK(om.find("# TYPE xtel_kv_read_seconds histogram") != std::string::npos);
    std::string text;
    CHECK(xtel::metrics::render(both, text, exposition::text) == 0);
}

TEST_CASE("openmetrics lists every agent's series of a family under one set of descriptors") {
    const auto text =
        rendered({agent_snapshot("a1", {counter_family("xtel_bytes_total", "Bytes.", 1)}),
                  agent_snapshot("a2", {counter_family("xtel_bytes_total", "Other.", 2)})},
                 exposition::openmetrics);
    CHECK(text == R"(# TYPE xtel_bytes counter
# HELP xtel_bytes Bytes.
xtel_bytes_total{agent_name="a1"} 1
xtel_bytes_total{agent_name="a2"} 2
# EOF
)");
}

TEST_CASE("a native-only histogram shows its +Inf bucket, _sum and _count in the text formats") {
    using xtel::metrics::metric_type;
    xtel::metrics::metric_store store;
    const auto h = store.add_family({.name = "lat_seconds",
                                     .help = "Transfer time",
                                     .type = metric_type::histogram,
                                     .label_names = {"op"},
                                     .decimals = 6,
                                     .unit = "seconds",
                                     .native = true,
                                     .native_schema = 3});
    store.observe(h, {"read"}, 450);
    store.observe(h, {"read"}, 2'000);
    const std::vector<std::shared_ptr<const xtel::metrics::snapshot>> s{
        std::make_shared<const xtel::metrics::snapshot>(
            xtel::metrics::take_snapshot(store, {{"agent_name", "a1"}}))};
    const std::string lines = R"(lat_seconds_bucket{agent_name="a1",op="read",le="+Inf"} 2
lat_seconds_sum{agent_name="a1",op="read"} 0.002450
lat_seconds_count{agent_name="a1",op="read"} 2
)";
    // The family has a label, so the store's folded-updates family has its series, after it.
    const std::string folded_help =
        "Updates folded into a family's overflow series (its labels \"other\") because the "
        "family had reached its limit of series.";
    const std::string folded =
        "xtel_metrics_series_folded_total{agent_name=\"a1\",family=\"lat_seconds\"} 0\n";
    std::string text;
    xtel::metrics::render(s, text, exposition::text);
    CHECK(text == "# HELP lat_seconds Transfer time\n# TYPE lat_seconds histogram\n" + lines +
                      "# HELP xtel_metrics_series_folded_total " + folded_help +
                      "\n# TYPE xtel_metrics_series_folded_total counter\n" + folded);
    std::string om;
    xtel::metrics::render(s, om, exposition::openmetrics);
    std::string om_help = folded_help;
    om_help.replace(om_help.find('"'), 1, "\\\"");
    om_help.replace(om_help.rfind('"'), 1, "\\\"");
    CHECK(om ==
          "# TYPE lat_seconds histogram\n# UNIT lat_seconds seconds\n"
          "# HELP lat_seconds Transfer time\n" +
              lines +
              "# TYPE xtel_metrics_series_folded counter\n# HELP xtel_metrics_series_folded " +
              om_help + "\n" + folded + "# EOF\n");
}

}  // namespace prometheus_render_test
