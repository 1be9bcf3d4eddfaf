#include "xtel/agent.hpp"

namespace xtel {

namespace detail {

std::string checked_agent_name(std::string name) {
    parse::file_name("agent name", name);
    return name;
}

}  // namespace detail

// The agents the registry hands out are compiled here once (see the extern templates in
// xtel/agent.hpp); a new precompiled pipeline adds its line here and its entry in registry.cpp.
template class basic_agent<telemetry<>>;
template class basic_agent<telemetry<buffer_exporter>>;
template class basic_agent<telemetry<buffer_exporter, plugin_exporter>>;
template class basic_agent<telemetry<plugin_exporter>>;
template class basic_agent<telemetry<prometheus_exporter>>;
template class basic_agent<telemetry<buffer_exporter, prometheus_exporter>>;

}  // namespace xtel
