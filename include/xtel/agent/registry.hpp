#pragma once
/// The registry behind make_agent (xtel/agent/agent.hpp) and make_telemetry
/// (xtel/agent/runtime_telemetry.hpp), for tools and tests: which exporter sets it can build. A set
/// is order-free: "prometheus,buffer" and "buffer,prometheus" name the same pipeline; "plugin"
/// stands for any number of plugins.

#include <span>
#include <string>
#include <vector>

#include "xtel/agent/agent.hpp"

namespace xtel {

/// The exporter sets the registry can build, in canonical form ("buffer", ...): every
/// combination of the built-in exporters and "plugin" (xtel/exporters/pipelines.hpp).
std::vector<std::string> exporter_sets();

/// The canonical form of an exporter set: names sorted and joined with ','.
std::string canonical_exporter_set(std::span<const std::string> names);

}  // namespace xtel
