// A plugin without nixl_telemetry_plugin_init: the loader must reject it by name.

#include <xtel/plugin/exporter_v1.hpp>

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
