#pragma once
/// The snapshot form of a metric store: what a publisher copies out of a metric_store after
/// a flush and every reader takes (the text, OpenMetrics and protobuf renderers, the node
/// file's codec, remote-write and OTLP), without touching the store. Plain values, no pointers into
/// the store: published behind a std::shared_ptr<const snapshot>, it never changes again, so any
/// number of readers on any thread read it without a lock. docs/metrics-processor.md describes each
/// field.

#include <cstdint>
#include <string>
#include <vector>

#include "xtel/metrics/metric_store.hpp"

namespace xtel::metrics {

/// A label every series of a snapshot carries, before its own (for an agent: agent_name).
struct label {
    std::string name;
    std::string value;

    friend bool operator==(const label&, const label&) = default;
};

/// One family: what it is (its spec: name, HELP, type, label names, decimals, bounds) and its
/// series in the order they were made. `series` holds the values as the store keeps them:
/// integers in units of 10^-decimals, histogram buckets not cumulative.
struct family_snapshot {
    family_spec spec;
    std::vector<metrics::series> series;

    friend bool operator==(const family_snapshot&, const family_snapshot&) = default;
};

/// One producer's metrics (an agent's) at one moment.
struct snapshot {
    /// Labels of every series, first: for an agent, agent_name.
    std::vector<label> labels;
    /// Families that have at least one series, sorted by name; names are unique.
    std::vector<family_snapshot> families;
    /// When the producer started counting (its cumulative values' start), microseconds since
    /// the epoch; 0 when not known. Not encoded in a node file's payload: the file's header
    /// has it (xtel-exporter sets it from there).
    std::uint64_t start_time_us = 0;

    friend bool operator==(const snapshot&, const snapshot&) = default;
};

/// Copies `store` into a snapshot whose series all carry `labels` first; with `served`, only the
/// families whose id it marks (those past its end are left out too).
snapshot take_snapshot(const metric_store& store,
                       std::vector<label> labels = {},
                       const std::vector<bool>* served = nullptr);

}  // namespace xtel::metrics
