// The snapshot form of the metric model: what a publisher copies out of a store, exactly.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "xtel/metrics/snapshot.hpp"

namespace metrics_snapshot_test {

using namespace xtel::metrics;

TEST_CASE("a snapshot holds every family with series, sorted by name, with exact values") {
    metric_store s;
    const auto bytes =
        s.add_family({"bytes_total", "Bytes.", metric_type::counter, {"peer"}, 0, {}});
    const auto secs =
        s.add_family({"time_seconds_total", "Seconds.", metric_type::counter, {}, 6, {}});
    const auto lat =
        s.add_family({"a_latency", "Latency.", metric_type::histogram, {}, 0, {10, 100}});
    s.add_family({"never_total", "No series yet.", metric_type::counter, {"x"}});
    s.add(bytes, {"p2"}, 7);
    s.add(bytes, {"p1"}, 5);
    s.add(bytes, {"p2"}, 1);
    s.add(secs, {}, 450);
    s.observe(lat, {}, 3);
    s.observe(lat, {}, 30);
    s.observe(lat, {}, 3000);

    const snapshot snap = take_snapshot(s, {{"agent_name", "a1"}, {"hostname", "h"}});
    CHECK(snap.labels == std::vector<label>{{"agent_name", "a1"}, {"hostname", "h"}});
    std::vector<std::string> names;
    for (const auto& f : snap.families) {
        names.push_back(f.spec.name);
    }
    // never_total has no series and is left out; the folded-updates family has one per family
    // with labels, at 0.
    CHECK(names == std::vector<std::string>{"a_latency", "bytes_total", "time_seconds_total",
                                            "xtel_metrics_series_folded_total"});

    const family_snapshot& l = snap.families[0];
    CHECK(l.spec.type == metric_type::histogram);
    CHECK(l.spec.bounds == std::vector<double>{10, 100});
    REQUIRE(l.series.size() == 1);
    CHECK(l.series[0].label_values.empty());
    CHECK(l.series[0].buckets == std::vector<std::uint64_t>{1, 1});
    CHECK(l.series[0].sum == 3033);
    CHECK(l.series[0].count == 3);

    const family_snapshot& b = snap.families[1];
    CHECK(b.spec == family_spec{"bytes_total", "Bytes.", metric_type::counter, {"peer"}, 0, {}});
    REQUIRE(b.series.size() == 2);  // in the order made
    CHECK(b.series[0].label_values == std::vector<std::string>{"p2"});
    CHECK(b.series[0].value == 8);
    CHECK(b.series[1].label_values == std::vector<std::string>{"p1"});
    CHECK(b.series[1].value == 5);

    CHECK(snap.families[2].spec.decimals == 6);
    CHECK(snap.families[2].series[0].value == 450);

    const family_snapshot& folded = snap.families[3];
    REQUIRE(folded.series.size() == 2);
    CHECK(folded.series[0].label_values == std::vector<std::string>{"bytes_total"});
    CHECK(folded.series[1].label_values == std::vector<std::string>{"never_total"});
    CHECK(folded.series[0].value == 0);
}

TEST_CASE("a snapshot does not change when the store goes on") {
    metric_store s;
    const auto c = s.add_family({"n_total", "h", metric_type::counter, {}});
    s.add(c, {}, 1);
    const snapshot before = take_snapshot(s);
    const snapshot copy = before;
    s.add(c, {}, 10);
    s.add_family({"m_total", "h", metric_type::counter, {}});
    s.add(s.series_of(*s.id_of("m_total"), {}), 2);
    CHECK(before == copy);
    CHECK(before.families.size() == 1);
    CHECK(before.families[0].series[0].value == 1);
    CHECK(take_snapshot(s).families.size() == 2);
}

}  // namespace metrics_snapshot_test
