#pragma once
/// The registry: from the NIXL_TELEMETRY_* configuration to an agent whose telemetry pipeline
/// was compiled once in src/. Telemetry off gives `basic_agent<telemetry<>>`; otherwise the set
/// of exporter names (NIXL_TELEMETRY_EXPORTER, "buffer" when unset) picks the instantiation.
/// The set is order-free: "prometheus,buffer" and "buffer,prometheus" name the same pipeline.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "xtel/agent.hpp"
#include "xtel/config.hpp"

namespace xtel {

/// An agent for `cfg`. Throws config_error when the exporter set names no precompiled pipeline
/// (the message lists those that exist), and what basic_agent's constructor throws.
std::unique_ptr<agent> make_agent(std::string name, const config& cfg, agent_options opts = {});

/// An agent configured from the environment (config::from_env()).
std::unique_ptr<agent> make_agent(std::string name);

/// The exporter sets the registry can build, in canonical form ("buffer", ...).
std::vector<std::string> exporter_sets();

/// The canonical form of an exporter set: names sorted and joined with ','.
std::string canonical_exporter_set(std::span<const std::string> names);

}  // namespace xtel
