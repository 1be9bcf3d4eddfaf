// A plugin built for an API version this xtel does not know (2).

#include <xtel/plugin/exporter_v1.hpp>

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr xtel::plugin::descriptor_v1 descriptor{
        static_cast<xtel::plugin::api_version>(2), "api_mismatch", "2.0.0", nullptr};
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
