// A plugin without nixl_telemetry_plugin_fini: rejected before its init runs.

#include <xtel/plugin/exporter_v1.hpp>

#include <stdexcept>

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    // The loader looks both entry points up before calling either, so this never runs.
    throw std::logic_error("init ran although fini is missing");
}
