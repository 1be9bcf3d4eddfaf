// A plugin whose init throws.

#include <xtel/plugin/exporter_v1.hpp>

#include <stdexcept>

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    throw std::runtime_error("the license server is unreachable");
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
