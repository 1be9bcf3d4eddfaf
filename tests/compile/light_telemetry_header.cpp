// What an engine with its own transport compiles: xtel/registry/runtime_telemetry.hpp alone, or
// with XTEL_OLD_INCLUDE_PATH the path it had before the registry left the agent component.
// tests/cmake/compile.cmake lists the headers this file pulls in (-H) and fails when one of them
// is an exporter, the pipeline template or the list of pipelines: they belong behind
// make_telemetry, in the library.

#include <memory>

#ifdef XTEL_OLD_INCLUDE_PATH
#include "xtel/agent/runtime_telemetry.hpp"
#else
#include "xtel/registry/runtime_telemetry.hpp"
#endif

std::unique_ptr<xtel::runtime_telemetry> make_quiet_pipeline() {
    auto t = xtel::make_telemetry("quiet", xtel::config{});
    t->add(xtel::category::transfer, "quiet_events", 1);
    return t;
}
