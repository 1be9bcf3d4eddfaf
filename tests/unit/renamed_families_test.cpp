// The families renamed in this release (docs/metrics.md, "Renamed in this release"): served
// under their new names only by default, and under both names, with equal series, while
// NIXL_TELEMETRY_COMPAT_NAMES is set.

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "prometheus_fixtures.hpp"
#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/renamed_families.hpp"

namespace renamed_families_test {

namespace {

using xtel::metrics::agent_metrics;
using xtel::metrics::agent_metrics_settings;
using xtel::metrics::family_snapshot;

agent_metrics_settings settings_of(std::map<std::string, std::string> vars) {
    auto s = agent_metrics_settings::from_env(xtel_test::env_table(std::move(vars)));
    s.hostname = "h";
    return s;
}

/// An agent's model after one flush's health (a buffer exporter that lost 7 events and a
/// Prometheus one turned off) and two events it could map to no family.
std::shared_ptr<const xtel::metrics::snapshot> flushed(agent_metrics& m) {
    const xtel::exporter_health rows[] = {{.name = "buffer", .disabled = false, .events_lost = 7},
                                          {.name = "prometheus", .disabled = true}};
    m.apply_health(rows);
    // A gauge event, then a counter event of the same name: the second fits no family.
    const auto gauge = prom_test::make(xtel::category::custom, "depth", 3, xtel::value_kind::gauge);
    const auto count =
        prom_test::make(xtel::category::custom, "depth", 1, xtel::value_kind::counter);
    m.apply(std::span(&gauge, 1));
    m.apply(std::span(&count, 1));
    m.apply(std::span(&count, 1));
    m.publish();
    return m.latest();
}

const family_snapshot* find(const xtel::metrics::snapshot& s, std::string_view name) {
    const auto it = std::find_if(s.families.begin(), s.families.end(),
                                 [&](const family_snapshot& f) { return f.spec.name == name; });
    return it == s.families.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("an agent serves the renamed families under their new names only by default",
          "[metrics][renamed]") {
    agent_metrics m("a1", settings_of({}));
    const auto s = flushed(m);
    for (const auto& r : xtel::metrics::renamed_families) {
        INFO(r.new_name);
        CHECK(find(*s, r.new_name) != nullptr);
        CHECK(find(*s, r.old_name) == nullptr);
    }
    const auto* up = find(*s, "xtel_telemetry_exporter_up");
    REQUIRE(up != nullptr);
    REQUIRE(up->series.size() == 2);
    CHECK(up->series[0].value == 1);  // buffer
    CHECK(up->series[1].value == 0);  // prometheus, turned off
    const auto* lost = find(*s, "xtel_telemetry_exporter_events_lost_total");
    REQUIRE(lost != nullptr);
    CHECK(lost->series.at(0).value == 7);
    const auto* unmapped = find(*s, "xtel_telemetry_events_unmapped_total");
    REQUIRE(unmapped != nullptr);
    CHECK(unmapped->series.at(0).value == 2);
}

TEST_CASE(
    "NIXL_TELEMETRY_COMPAT_NAMES=1 serves each renamed family under both names with "
    "equal series, in name order",
    "[metrics][renamed]") {
    agent_metrics m("a1", settings_of({{"NIXL_TELEMETRY_COMPAT_NAMES", "1"}}));
    const auto s = flushed(m);
    for (const auto& r : xtel::metrics::renamed_families) {
        INFO(r.old_name);
        const auto* now = find(*s, r.new_name);
        const auto* old = find(*s, r.old_name);
        REQUIRE(now != nullptr);
        REQUIRE(old != nullptr);
        CHECK(old->series == now->series);
        CHECK(old->spec.type == now->spec.type);
        CHECK(old->spec.label_names == now->spec.label_names);
        CHECK(old->spec.help.starts_with("Renamed " + std::string(r.new_name)));
    }
    CHECK(find(*s, "xtel_exporter_events_lost_total")->series.at(0).value == 7);
    CHECK(find(*s, "xtel_prometheus_ignored_events_total")->series.at(0).value == 2);
    CHECK(std::is_sorted(s->families.begin(), s->families.end(),
                         [](const family_snapshot& a, const family_snapshot& b) {
                             return a.spec.name < b.spec.name;
                         }));
}

TEST_CASE(
    "NIXL_TELEMETRY_COMPAT_NAMES takes the boolean spellings and refuses others, naming "
    "the variable",
    "[metrics][renamed]") {
    CHECK_FALSE(settings_of({}).compat_names);
    CHECK(settings_of({{"NIXL_TELEMETRY_COMPAT_NAMES", "yes"}}).compat_names);
    CHECK_FALSE(settings_of({{"NIXL_TELEMETRY_COMPAT_NAMES", "0"}}).compat_names);
    CHECK_THROWS_WITH(settings_of({{"NIXL_TELEMETRY_COMPAT_NAMES", "old"}}),
                      Catch::Contains("NIXL_TELEMETRY_COMPAT_NAMES") && Catch::Contains("'old'"));
}

}  // namespace renamed_families_test
