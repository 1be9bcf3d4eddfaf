// What an engine with its own transport compiles: xtel/agent/runtime_telemetry.hpp alone.
// tests/cmake/compile.cmake lists the headers this file pulls in (-H) and fails when one of them
// is an exporter, the pipeline template or the list of pipelines: they belong behind
// make_telemetry, in the library.

#include <memory>

#include "xtel/agent/runtime_telemetry.hpp"

std::unique_ptr<xtel::runtime_telemetry> make_quiet_pipeline() {
    auto t = xtel::make_telemetry("quiet", xtel::config{});
    t->add(xtel::category::transfer, "quiet_events", 1);
    return t;
}
