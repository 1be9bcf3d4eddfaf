// make_agent (xtel/agent/agent.hpp): the agent over the pipeline the registry chose
// (xtel/registry/pipeline_choice.hpp, the same choice make_telemetry makes).

#include <array>
#include <memory>
#include <string>
#include <utility>

#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/registry/pipeline_choice.hpp"

namespace xtel {

namespace {

using agent_factory = std::unique_ptr<agent> (*)(std::string, const config&, const agent_options&);

template <class Telemetry>
std::unique_ptr<agent> make(std::string name, const config& cfg, const agent_options& opts) {
    return std::make_unique<basic_agent<Telemetry>>(std::move(name), cfg, opts);
}

/// The factory of the agent over each mask's pipeline, indexed by mask (0: telemetry off).
template <unsigned... M>
constexpr std::array<agent_factory, sizeof...(M)> factories(std::integer_sequence<unsigned, M...>) {
    return {&make<pipeline_t<M>>...};
}
constexpr auto agent_factories = factories(std::make_integer_sequence<unsigned, pipeline_count>{});

}  // namespace

std::unique_ptr<agent> make_agent(std::string name, const config& given, agent_options opts) {
    const auto choice = detail::choose_pipeline(given);
    return agent_factories[choice.mask](std::move(name), choice.cfg, opts);
}

std::unique_ptr<agent> make_agent(std::string name) {
    return make_agent(std::move(name), config::from_env());
}

}  // namespace xtel
