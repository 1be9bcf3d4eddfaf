#pragma once
/// Attribute and resource population of OTLP requests (private to src/push/).

#include <cstdint>
#include <span>
#include <string_view>

#include "otlp_metrics.pb.h"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/push/otlp.hpp"

namespace xtel::push::detail {

using otlp_attributes = google::protobuf::RepeatedPtrField<xtel::otlp::KeyValue>;

/// Adds `key` with a string value (as valid UTF-8).
void put(otlp_attributes& out, std::string_view key, std::string_view value);
/// Adds `key` with an integer value.
void put(otlp_attributes& out, std::string_view key, std::int64_t value);

/// The resource of one agent's snapshot (`agent`), or of xtel-exporter's own (nullptr).
void fill_resource(xtel::otlp::Resource& r,
                   const otlp_resource& common,
                   const metrics::snapshot* agent);

/// The resource of an agent whose labels are `agent_labels` (agent_name, rank, local_rank, pid
/// as its snapshot carries them), as fill_resource gives its snapshot.
void fill_agent_resource(xtel::otlp::Resource& r,
                         const otlp_resource& common,
                         std::span<const metrics::label> agent_labels);

/// A series' label values as its point's attributes, under the family's label names.
template <class Point>
void fill_attributes(Point& point, const metrics::family_spec& spec, const metrics::series& s) {
    const auto& names = spec.label_names;
    for (std::size_t i = 0; i < names.size() && i < s.label_values.size(); ++i) {
        put(*point.mutable_attributes(), names[i], s.label_values[i]);
    }
}

}  // namespace xtel::push::detail
