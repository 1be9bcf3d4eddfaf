// What a program that only makes agents compiles: xtel/agent/agent.hpp alone.
// tests/cmake/compile.cmake lists the headers this file pulls in (-H) and fails when one of them is
// the UCX backend, an exporter, the pipeline or a UCX header: they belong behind make_agent, in the
// library.

#include <memory>

#include "xtel/agent/agent.hpp"

std::unique_ptr<xtel::agent> make_quiet_agent() {
    xtel::agent_options opts;
    opts.telemetry.start_flusher = false;
    return xtel::make_agent("quiet", xtel::config{}, opts);
}
