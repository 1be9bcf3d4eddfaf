#pragma once
// A latency histogram with native buckets as a real metric_store keeps it, for the tests of what
// the push clients make of one (remote write, OTLP) before node files carry native buckets.
//
// Observed, in µs: 0, 450, 460, 1000, 1000 and 3'000'000. Shown in seconds at schema 3
// (bucket i ends at 2^(i/8)): 0 is in the zero bucket; 0.00045 and 0.00046 in bucket -88
// (8 * log2 0.00045 = -88.94, 8 * log2 0.00046 = -88.69); 0.001 in bucket -79 (-79.73); 3 in
// bucket 13 (12.68). The sum is 3.00291 s.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel_test {

inline constexpr std::uint64_t native_observed_us[] = {0, 450, 460, 1000, 1000, 3'000'000};

/// A store with the family `name` (µs shown as seconds, label op, native at `schema`, classic
/// `bounds` too unless empty) and the series op="write" holding `values_us`.
inline xtel::metrics::metric_store native_store(
    std::string_view name,
    std::vector<double> bounds = {},
    std::span<const std::uint64_t> values_us = native_observed_us,
    std::int8_t schema = 3) {
    xtel::metrics::metric_store store;
    xtel::metrics::family_spec spec{.name = std::string(name),
                                    .help = "Transfer latency.",
                                    .type = xtel::metrics::metric_type::histogram,
                                    .label_names = {"op"},
                                    .decimals = 6,
                                    .bounds = std::move(bounds),
                                    .unit = "seconds",
                                    .native = true,
                                    .native_schema = schema};
    const auto id = store.add_family(std::move(spec));
    for (const std::uint64_t v : values_us) {
        store.observe(id, {"write"}, v);
    }
    return store;
}

/// native_store's family as an agent's snapshot (agent_name="a"), started at `start_us`;
/// without the store's folded-updates family, which every store has.
inline std::shared_ptr<const xtel::metrics::snapshot> native_snapshot(
    const xtel::metrics::metric_store& store, std::uint64_t start_us = 0) {
    auto snap = std::make_shared<xtel::metrics::snapshot>(
        xtel::metrics::take_snapshot(store, {{"agent_name", "a"}}));
    std::erase_if(snap->families,
                  [](const xtel::metrics::family_snapshot& f) { return !f.spec.native; });
    snap->start_time_us = start_us;
    return snap;
}

}  // namespace xtel_test
