// Every pipeline xtel hands out, compiled once: the telemetry and the agent of each mask over
// the built-in exporters and plugins (xtel/exporters/pipelines.hpp declares them extern), so
// programs that use them pay no compile time for them. Generated from the list of built-in
// exporters; nothing here changes when one is added.

#include "xtel/exporters/pipelines.hpp"

#include "xtel/agent/basic_agent.hpp"

namespace xtel {

#define XTEL_INSTANTIATE_PIPELINE(mask)                         \
    template class basic_telemetry<pipeline_exporters_t<mask>>; \
    template class basic_agent<pipeline_t<mask>>;
XTEL_FOR_EACH_PIPELINE_MASK(XTEL_INSTANTIATE_PIPELINE)
#undef XTEL_INSTANTIATE_PIPELINE

}  // namespace xtel
