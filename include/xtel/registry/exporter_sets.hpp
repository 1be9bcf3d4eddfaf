#pragma once
/// The exporter sets the registry can build, for tools and tests: the names make_telemetry
/// (xtel/registry/runtime_telemetry.hpp) and make_agent (xtel/agent/agent.hpp) accept in
/// NIXL_TELEMETRY_EXPORTER. A set is order-free: "prometheus,buffer" and "buffer,prometheus"
/// name the same pipeline; "plugin" stands for any number of plugins.

#include <span>
#include <string>
#include <vector>

namespace xtel {

/// The exporter sets the registry can build, in canonical form ("buffer", ...): every
/// combination of the built-in exporters and "plugin" (xtel/exporters/pipelines.hpp).
std::vector<std::string> exporter_sets();

/// The canonical form of an exporter set: names sorted and joined with ','.
std::string canonical_exporter_set(std::span<const std::string> names);

}  // namespace xtel
