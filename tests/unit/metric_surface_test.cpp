// The metric surface an operator chooses (docs/metrics.md, "Families"): the family sets, the
// NIXL allowlist, and one name per family in every exposition format.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prometheus_fixtures.hpp"
#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/openmetrics_names.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace metric_surface_test {

namespace {

using xtel::metrics::agent_metrics;
using xtel::metrics::agent_metrics_settings;
using xtel::metrics::exposition;
using xtel::metrics::family_sets;
using xtel::metrics::family_spec;
using xtel::metrics::metric_store;
using xtel::metrics::metric_type;

/// The family names `m` publishes.
std::vector<std::string> served(const agent_metrics& m) {
    std::vector<std::string> out;
    for (const auto& f : m.latest()->families) {
        out.push_back(f.spec.name);
    }
    return out;
}

/// `m` once its agent's UCX backend started: what it records then (its version, which
/// xtel_build_info shows) folded and published.
const agent_metrics& started(agent_metrics& m) {
    const auto version =
        prom_test::make(xtel::category::backend, "ucx_version", 11301, xtel::value_kind::gauge);
    m.apply(std::span(&version, 1));
    m.publish();
    return m;
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::size_t count_prefix(const std::vector<std::string>& v, std::string_view prefix) {
    return static_cast<std::size_t>(std::count_if(
        v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); }));
}

agent_metrics_settings settings_of(std::map<std::string, std::string> vars) {
    auto s = agent_metrics_settings::from_env(xtel_test::env_table(std::move(vars)));
    s.hostname = "h";
    return s;
}

std::string rendered(const metric_store& store, exposition format) {
    const std::vector<std::shared_ptr<const xtel::metrics::snapshot>> snaps{
        std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::take_snapshot(store))};
    std::string out;
    CHECK(xtel::metrics::render(snaps, out, format) == 0);
    return out;
}

bool has_line(const std::string& text, std::string_view line) {
    return text.find("\n" + std::string(line) + "\n") != std::string::npos ||
           text.starts_with(std::string(line) + "\n");
}

std::string metrics_error_of(metric_store& store, family_spec spec) {
    try {
        store.add_family(std::move(spec));
    } catch (const xtel::metrics::metrics_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE(
    "a counter whose OpenMetrics name a gauge takes is served as unknown under its full "
    "name, in either order of declaration",
    "[prometheus][surface]") {
    for (const bool gauge_first : {true, false}) {
        INFO("gauge first: " << gauge_first);
        metric_store store;
        const family_spec gauge{"xfer_time", "last", metric_type::gauge, {}};
        const family_spec counter{"xfer_time_total", "summed", metric_type::counter, {}};
        const auto g = store.add_family(gauge_first ? gauge : counter);
        const auto c = store.add_family(gauge_first ? counter : gauge);
        store.set(gauge_first ? g : c, {}, 7);
        store.add(gauge_first ? c : g, {}, 5);
        const auto om = rendered(store, exposition::openmetrics);
        CHECK(has_line(om, "# TYPE xfer_time gauge"));
        CHECK(has_line(om, "xfer_time 7"));
        CHECK(has_line(om, "# TYPE xfer_time_total unknown"));
        CHECK(has_line(om, "# HELP xfer_time_total summed"));
        CHECK(has_line(om, "xfer_time_total 5"));
        // The text format keeps the counter's type; the sample has the same name in both.
        const auto text = rendered(store, exposition::text);
        CHECK(has_line(text, "# TYPE xfer_time_total counter"));
        CHECK(has_line(text, "xfer_time_total 5"));
    }
}

TEST_CASE("a family an OpenMetrics body would have to leave out is refused where it is declared",
          "[prometheus][surface]") {
    SECTION("a gauge named as a histogram's _created sample") {
        metric_store store;
        store.add_family({"lat", "h", metric_type::histogram, {}, 0, {1, 2}});
        const auto message = metrics_error_of(store, {"lat_created", "g", metric_type::gauge, {}});
        CHECK_THAT(message, Catch::StartsWith("metric family 'lat_created' is refused"));
        CHECK_THAT(message, Catch::Contains("OpenMetrics"));
        CHECK_THAT(message, Catch::Contains("'lat'"));
        CHECK_FALSE(store.id_of("lat_created"));
    }
    SECTION("and the other way round") {
        metric_store store;
        store.add_family({"lat_created", "g", metric_type::gauge, {}});
        CHECK_THAT(metrics_error_of(store, {"lat", "h", metric_type::histogram, {}, 0, {1, 2}}),
                   Catch::StartsWith("metric family 'lat' is refused"));
    }
    SECTION("two counters whose names end as each other's OpenMetrics samples") {
        metric_store store;
        store.add_family({"a_total", "h", metric_type::counter, {}});
        // a_created_total: typed it is family a_created, which a_total claims (a_created);
        // unknown, its full name is free, so it is kept.
        CHECK(metrics_error_of(store, {"a_created_total", "h", metric_type::counter, {}}).empty());
    }
}

TEST_CASE("an agent serves the xtel set by default, with its health, and none of the NIXL set",
          "[prometheus][surface]") {
    agent_metrics m("a1", settings_of({}));
    const auto names = served(started(m));
    CHECK(count_prefix(names, "agent_") == 0);
    CHECK(contains(names, "xtel_errors_total"));
    CHECK(contains(names, "xtel_memory_registered_bytes"));
    CHECK(contains(names, "xtel_telemetry_events_dropped_total"));
    CHECK(contains(names, "xtel_build_info"));
    CHECK(contains(names, "xtel_metrics_series_folded_total"));
}

TEST_CASE("NIXL_TELEMETRY_METRIC_SET=nixl serves the NIXL set and the telemetry's health alone",
          "[prometheus][surface]") {
    agent_metrics m("a1", settings_of({{"NIXL_TELEMETRY_METRIC_SET", "NIXL"}}));
    const auto names = served(started(m));
    CHECK(contains(names, "agent_tx_bytes_total"));  // the legacy builder, at 0
    CHECK(contains(names, "agent_xfer_time_us"));
    CHECK(contains(names, "agent_errors_total"));
    CHECK(contains(names, "agent_telemetry_events_dropped_total"));
    CHECK(contains(names, "xtel_build_info"));
    CHECK(contains(names, "xtel_telemetry_exporter_events_lost_total") ==
          false);  // none before a flush
    CHECK_FALSE(contains(names, "xtel_errors_total"));
    CHECK_FALSE(contains(names, "xtel_memory_registered_bytes"));
    CHECK_FALSE(contains(names, "xtel_telemetry_events_dropped_total"));
}

TEST_CASE("both sets serve each family once", "[prometheus][surface]") {
    const agent_metrics m("a1", settings_of({{"NIXL_TELEMETRY_METRIC_SET", "both"}}));
    const auto names = served(m);
    CHECK(contains(names, "agent_xfer_time_total"));
    CHECK(contains(names, "xtel_errors_total"));
    auto sorted = names;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
}

TEST_CASE(
    "NIXL_TELEMETRY_ENABLED_METRICS selects by upstream's event names, and its NIXL names "
    "bring the NIXL set",
    "[prometheus][surface]") {
    const auto s =
        settings_of({{"NIXL_TELEMETRY_ENABLED_METRICS", " agent_tx_bytes, agent_err_backend,,"}});
    CHECK(s.sets == family_sets::both);
    CHECK(s.enabled_metrics == std::vector<std::string>{"agent_tx_bytes", "agent_err_backend"});
    const agent_metrics m("a1", s);
    auto names = served(m);
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"agent_errors_total", "agent_tx_bytes_total",
                                            "agent_tx_last_bytes"});
    // agent_err_backend: that status's series alone.
    const auto& families = m.latest()->families;
    const auto errors = std::find_if(families.begin(), families.end(), [](const auto& f) {
        return f.spec.name == "agent_errors_total";
    });
    REQUIRE(errors != families.end());
    REQUIRE(errors->series.size() == 1);
    CHECK(errors->series[0].label_values == std::vector<std::string>{"h", "backend"});
}

TEST_CASE("an allowlist glob of xtel names selects within the xtel set, which stays the default",
          "[prometheus][surface]") {
    const auto s =
        settings_of({{"NIXL_TELEMETRY_ENABLED_METRICS", "xtel_memory_*,xtel_errors_total"}});
    CHECK(s.sets == family_sets::xtel);
    auto names = served(agent_metrics("a1", s));
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{
                       "xtel_errors_total", "xtel_memory_deregistrations_total",
                       "xtel_memory_registered_bytes", "xtel_memory_registrations_total"});
    // An explicit set wins over what the allowlist's names suggest.
    CHECK(settings_of({{"NIXL_TELEMETRY_METRIC_SET", "xtel"},
                       {"NIXL_TELEMETRY_ENABLED_METRICS", "agent_tx_bytes"}})
              .sets == family_sets::xtel);
}

TEST_CASE("a malformed set or allowlist is a config_error naming the variable and value",
          "[prometheus][surface]") {
    const auto error_of = [](std::map<std::string, std::string> vars) -> std::string {
        try {
            agent_metrics_settings::from_env(xtel_test::env_table(std::move(vars)));
        } catch (const xtel::config_error& e) {
            return e.what();
        }
        return {};
    };
    for (const char* bad : {"", "nixl,xtel", "all", "xtel "}) {
        INFO(bad);
        const auto message = error_of({{"NIXL_TELEMETRY_METRIC_SET", bad}});
        if (std::string_view(bad) == "xtel ") {
            CHECK(message.empty());  // spaces around a value are ignored, as elsewhere
            continue;
        }
        CHECK_THAT(message, Catch::StartsWith(
                                fmt::format("NIXL_TELEMETRY_METRIC_SET='{}' is invalid", bad)));
        CHECK_THAT(message, Catch::Contains("expected xtel"));
    }
    CHECK_THAT(
        error_of({{"NIXL_TELEMETRY_ENABLED_METRICS", "agent_tx_bytes,agent rx"}}),
        Catch::StartsWith("NIXL_TELEMETRY_ENABLED_METRICS='agent_tx_bytes,agent rx' is invalid"));
    // Empty is upstream's "everything".
    CHECK(error_of({{"NIXL_TELEMETRY_ENABLED_METRICS", ""}}).empty());
    CHECK(error_of({{"NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US", ""}}).empty());
}

TEST_CASE("the node file carries only the families the agent's allowlist serves",
          "[node_file][surface]") {
    const xtel_test::temp_dir dir;
    xtel::config cfg;
    xtel::node_settings ns;
    ns.directory = dir.path();
    auto model = settings_of(
        {{"NIXL_TELEMETRY_ENABLED_METRICS", "agent_err_*,xtel_memory_registered_bytes"}});
    {
        const auto m = std::make_shared<xtel::metrics::agent_metrics>("chosen", model);
        xtel::node_exporter e({{cfg, "chosen"}, m}, ns);
        m->publish();
        e.on_flush_end();
    }
    xtel::node::file::reader r(dir.path() / "chosen.metrics");
    const auto p = r.read_latest();
    REQUIRE(p);
    const auto snap = xtel::metrics::decode_snapshot(p->payload);
    std::vector<std::string> names;
    for (const auto& f : snap.families) {
        names.push_back(f.spec.name);
    }
    CHECK(names == std::vector<std::string>{"agent_errors_total", "xtel_memory_registered_bytes"});
    REQUIRE(snap.families[0].series.size() == 12);  // agent_err_*: every status
}

TEST_CASE(
    "an allowlist item that matches nothing served is logged once at start, saying which set "
    "serves it",
    "[prometheus][surface]") {
    const xtel_test::log_capture logs;
    auto s = settings_of(
        {{"NIXL_TELEMETRY_METRIC_SET", "xtel"},
         {"NIXL_TELEMETRY_ENABLED_METRICS", "xtel_errors_total,agent_tx_bytes,nope_*"}});
    const agent_metrics m("a1", s);
    const auto warnings = logs.at(xtel::log_level::warning);
    INFO(fmt::format("{}", fmt::join(warnings, "\n")));
    REQUIRE(warnings.size() == 2);
    CHECK_THAT(warnings[0], Catch::Contains("'agent_tx_bytes' names only metrics of a family set "
                                            "NIXL_TELEMETRY_METRIC_SET=xtel does not serve") &&
                                Catch::Contains("nixl or both"));
    CHECK_THAT(warnings[1], Catch::Contains("'nope_*' matches no metric this agent serves"));
    CHECK(served(m) == std::vector<std::string>{"xtel_errors_total"});
}

}  // namespace metric_surface_test
