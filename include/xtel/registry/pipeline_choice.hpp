#pragma once
/// How a configuration becomes one of the precompiled pipelines, chosen once for both factories:
/// make_telemetry (this component) builds the pipeline of the mask chosen, make_agent (the agent
/// component, which links UCX) the agent over it. What the choice refuses and warns about is
/// therefore the same for both; the pipelines themselves are compiled in this component
/// (src/registry/pipelines.cpp), without UCX.

#include <string>

#include "xtel/core/config.hpp"

namespace xtel::detail {

/// Checks an agent's or a pipeline's name (it becomes a file name); throws config_error.
std::string checked_agent_name(std::string name);

/// The pipeline a configuration names: the mask of pipeline_t (xtel/exporters/pipelines.hpp;
/// 0 is telemetry off), and the configuration to build it with, its built-in exporters'
/// names spelled as declared.
struct pipeline_choice {
    unsigned mask = 0;
    config cfg;
};

/// The choice for `cfg`: mask 0 when telemetry is off or NIXL's NOP is named alone (said once).
/// Throws config_error when it names a plugin that is not there, an exporter twice, or a set of
/// exporters no pipeline was compiled for (the message names the variable, the value and what
/// exists); warns once for each NIXL variable set that none of the exporters named reads.
pipeline_choice choose_pipeline(const config& cfg);

}  // namespace xtel::detail
