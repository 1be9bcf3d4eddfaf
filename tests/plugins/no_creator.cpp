// A plugin whose descriptor has no creator.

#include <xtel/plugin/exporter_v1.hpp>

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr xtel::plugin::descriptor_v1 descriptor{xtel::plugin::api_version::v1,
                                                            "no_creator", "1.0.0", nullptr};
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
