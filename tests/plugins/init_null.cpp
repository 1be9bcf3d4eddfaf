// A plugin whose init declines to load.

#include <xtel/plugin/exporter_v1.hpp>

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    return nullptr;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
