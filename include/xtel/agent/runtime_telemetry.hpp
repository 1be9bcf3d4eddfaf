#pragma once
/// The old path of xtel/registry/runtime_telemetry.hpp, kept for programs that include it:
/// make_telemetry moved to the registry component, which links no UCX (docs/architecture.md).
#include "xtel/registry/runtime_telemetry.hpp"
