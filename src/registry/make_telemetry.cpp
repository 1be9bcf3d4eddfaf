// make_telemetry (xtel/registry/runtime_telemetry.hpp): the pipeline of the mask the registry
// chose, behind the run-time interface. Nothing here names the agent or UCX, so that a program
// that records through it (an engine with its own transport, the Python module) links no UCX.

#include <array>
#include <memory>
#include <string>
#include <utility>

#include "registry/pipeline_telemetry.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/registry/pipeline_choice.hpp"
#include "xtel/registry/runtime_telemetry.hpp"

namespace xtel {

namespace {

using telemetry_factory = std::unique_ptr<runtime_telemetry> (*)(std::string,
                                                                 const config&,
                                                                 const telemetry_options&);

template <class Telemetry>
std::unique_ptr<runtime_telemetry> make_pipeline(std::string name,
                                                 const config& cfg,
                                                 const telemetry_options& opts) {
    return std::make_unique<detail::pipeline_telemetry<Telemetry>>(cfg, std::move(name), opts);
}

/// The factory of each mask's pipeline, indexed by mask (0: telemetry off).
template <unsigned... M>
constexpr std::array<telemetry_factory, sizeof...(M)> factories(
    std::integer_sequence<unsigned, M...>) {
    return {&make_pipeline<pipeline_t<M>>...};
}
constexpr auto telemetry_factories =
    factories(std::make_integer_sequence<unsigned, pipeline_count>{});

}  // namespace

std::unique_ptr<runtime_telemetry> make_telemetry(std::string name,
                                                  const config& given,
                                                  telemetry_options opts) {
    // Checked before anything starts, as an agent's is: it names the exporters' files.
    name = detail::checked_agent_name(std::move(name));
    const auto choice = detail::choose_pipeline(given);
    return telemetry_factories[choice.mask](std::move(name), choice.cfg, opts);
}

std::unique_ptr<runtime_telemetry> make_telemetry(std::string name) {
    return make_telemetry(std::move(name), config::from_env());
}

}  // namespace xtel
