#pragma once
/// The old path of xtel/registry/exporter_sets.hpp, with make_agent beside it as it was, kept
/// for programs that include it: the registry moved below the agent so that make_telemetry
/// links no UCX (docs/architecture.md).
#include "xtel/agent/agent.hpp"
#include "xtel/registry/exporter_sets.hpp"
