// make_telemetry: the pipeline NIXL_TELEMETRY_* ask for, from the registry make_agent uses, for
// an engine with its own transport.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <type_traits>

#include "registry/pipeline_telemetry.hpp"
#include "test_util.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/names.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"
#include "xtel/registry/runtime_telemetry.hpp"

namespace make_telemetry_test {

namespace {

using xtel_test::scoped_env;
using xtel_test::telemetry_env;
using xtel_test::temp_dir;

/// The values of a node file's family by its series' last label value (remote_agent for the
/// notified families).
std::map<std::string, std::uint64_t> by_peer(const std::filesystem::path& file,
                                             std::string_view family) {
    xtel::node::file::reader r(file);
    const auto p = r.read_latest();
    REQUIRE(p);
    std::map<std::string, std::uint64_t> out;
    for (const auto& f : xtel::metrics::decode_snapshot(p->payload).families) {
        if (f.spec.name == family) {
            for (const auto& s : f.series) {
                out[s.label_values.back()] += s.value;
            }
        }
    }
    return out;
}

/// The events of a flight recorder, by name: the last value recorded under each.
std::map<std::string, std::uint64_t> recorded(const std::filesystem::path& file) {
    xtel::flight_recorder::reader r(file);
    std::map<std::string, std::uint64_t> out;
    (void)r.poll([&](const xtel::event& e) { out[std::string(e.name_view())] = e.value; });
    return out;
}

}  // namespace

TEST_CASE("make_telemetry builds the exporters NIXL_TELEMETRY_EXPORTER names", "[make_telemetry]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", "node"},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto t = xtel::make_telemetry("engine");
    CHECK(t->enabled());
    CHECK(t->name() == "engine");
    // The node exporter's file, and not the flight recorder the default exporter would write.
    CHECK(std::filesystem::is_regular_file(dir.path() / "engine.metrics"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "engine"));
}

TEST_CASE("make_telemetry records into the flight recorder the environment places",
          "[make_telemetry]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", std::nullopt},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", "64"}};
    const auto t = xtel::make_telemetry("engine");
    t->set(xtel::category::memory, xtel::names::agent_memory_registered, 1 << 20);
    t->add(xtel::category::backend, "engine_retries", 3);
    t->record_transfer(xtel::direction::rx, xtel::clock::now_us(), 65536, 2, 10, 250);
    t->flush();
    CHECK(t->stats().events_exported == 6);  // two events, and four from the transfer

    xtel::flight_recorder::reader r(dir.path() / "engine");
    CHECK(r.capacity() == 64);  // NIXL_TELEMETRY_BUFFER_SIZE was honoured too
    const auto events = recorded(dir.path() / "engine");
    CHECK(events.at("agent_memory_registered") == 1 << 20);
    CHECK(events.at("engine_retries") == 3);
    CHECK(events.at("agent_rx_bytes") == 65536);
    CHECK(events.at("agent_rx_requests_num") == 2);
    CHECK(events.at("agent_xfer_time") == 250);
    CHECK(events.at("agent_xfer_post_time") == 10);
}

TEST_CASE("make_telemetry with telemetry off records nothing and writes no file",
          "[make_telemetry]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "n"},
                            {"NIXL_TELEMETRY_EXPORTER", "buffer"},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto t = xtel::make_telemetry("quiet");
    CHECK_FALSE(t->enabled());
    t->set(xtel::category::memory, xtel::names::agent_memory_registered, 4096);
    t->record_transfer(xtel::direction::tx, xtel::clock::now_us(), 4096, 1, 1, 2);
    t->flush();
    CHECK(t->stats().events_exported == 0);
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("make_telemetry throws config_error naming a malformed variable", "[make_telemetry]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", std::nullopt},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", "lots"}};
    CHECK_THROWS_AS(xtel::make_telemetry("engine"), xtel::config_error);
    CHECK_THROWS_WITH(xtel::make_telemetry("engine"),
                      Catch::Contains("NIXL_TELEMETRY_BUFFER_SIZE='lots' is invalid"));
    {
        const scoped_env enable("NIXL_TELEMETRY_ENABLE", "maybe");
        CHECK_THROWS_AS(xtel::make_telemetry("engine"), xtel::config_error);
        CHECK_THROWS_WITH(xtel::make_telemetry("engine"),
                          Catch::Contains("NIXL_TELEMETRY_ENABLE='maybe' is invalid"));
    }
    {
        const scoped_env exporter("NIXL_TELEMETRY_EXPORTER", "nosuch");
        const scoped_env size("NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt);
        CHECK_THROWS_AS(xtel::make_telemetry("engine"), xtel::config_error);
        CHECK_THROWS_WITH(xtel::make_telemetry("engine"),
                          Catch::Contains("NIXL_TELEMETRY_EXPORTER='nosuch' is invalid"));
    }
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("make_telemetry refuses what make_agent refuses before anything starts",
          "[make_telemetry]") {
    temp_dir dir;
    const auto cfg = xtel_test::enabled_config({"buffer", "nosuch"}, dir.path().string());
    CHECK_THROWS_WITH(xtel::make_telemetry("engine", cfg),
                      Catch::Contains("NIXL_TELEMETRY_EXPORTER='buffer,nosuch'") &&
                          Catch::Contains("not a built-in exporter (buffer, prometheus, node)"));
    CHECK_THROWS_AS(
        xtel::make_telemetry("../escape", xtel_test::enabled_config({"buffer"}, dir.path())),
        xtel::config_error);
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("make_telemetry hands out the registry's pipelines whatever order they are named in",
          "[make_telemetry]") {
    temp_dir dir;
    const auto t = xtel::make_telemetry(
        "both", xtel_test::enabled_config({"node", "buffer"}, dir.path().string()));
    CHECK(std::filesystem::is_regular_file(dir.path() / "both"));
    CHECK(std::filesystem::is_regular_file(dir.path() / "both.metrics"));
}

TEST_CASE(
    "a notified transfer through runtime_telemetry counts for its initiator on the target only",
    "[make_telemetry]") {
    temp_dir dir;
    const auto t =
        xtel::make_telemetry("target", xtel_test::enabled_config({"node"}, dir.path().string()));
    xtel::transfer_attributes attrs;
    attrs.remote_agent = t->labels().intern("initiator-1");
    attrs.op = xtel::transfer_op::write;
    t->record_notified(xtel::clock::now_us(), 65536, attrs);
    t->record_notified(xtel::clock::now_us(), 4096, attrs);
    // A transfer of the target's own, with its shape, beside them.
    attrs.remote_agent = t->labels().intern("peer-2");
    t->record_transfer(xtel::direction::tx, xtel::clock::now_us(), 512, 1, 1, 9, attrs, {},
                       xtel::transfer_shape{4, 0});
    t->flush();
    const auto file = dir.path() / "target.metrics";
    CHECK(by_peer(file, "xtel_notified_transfers_total") ==
          std::map<std::string, std::uint64_t>{{"initiator-1", 2}});
    CHECK(by_peer(file, "xtel_notified_bytes_total") ==
          std::map<std::string, std::uint64_t>{{"initiator-1", 65536 + 4096}});
    // The target's own transfer families hold its own transfer only (bytes summed over series).
    std::uint64_t own = 0;
    for (const auto& [last_label, bytes] : by_peer(file, "xtel_transfer_bytes_total")) {
        own += bytes;
    }
    CHECK(own == 512);
}

TEST_CASE("the pipelines behind runtime_telemetry are final so a record is one virtual call",
          "[make_telemetry]") {
    STATIC_REQUIRE(std::is_final_v<xtel::detail::pipeline_telemetry<xtel::buffer_telemetry>>);
    STATIC_REQUIRE(std::is_final_v<xtel::detail::pipeline_telemetry<xtel::disabled_telemetry>>);
    STATIC_REQUIRE(std::is_base_of_v<xtel::runtime_telemetry,
                                     xtel::detail::pipeline_telemetry<xtel::buffer_telemetry>>);
}

}  // namespace make_telemetry_test
