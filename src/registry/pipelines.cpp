// Every pipeline xtel hands out, compiled once: the telemetry of each mask over the built-in
// exporters and plugins (xtel/exporters/pipelines.hpp declares them extern), so programs that
// use them pay no compile time for them, and need no UCX (the agents over them are compiled in
// src/agent/pipelines.cpp). Generated from the list of built-in exporters; nothing here changes
// when one is added.

#include "xtel/exporters/pipelines.hpp"

namespace xtel {

#define XTEL_INSTANTIATE_PIPELINE(mask) template class basic_telemetry<pipeline_exporters_t<mask>>;
XTEL_FOR_EACH_PIPELINE_MASK(XTEL_INSTANTIATE_PIPELINE)
#undef XTEL_INSTANTIATE_PIPELINE

}  // namespace xtel
