// A plugin that needs a function nothing provides, as one built against a missing library
// would. RTLD_NOW makes dlopen fail at once, naming the symbol.

#include <xtel/plugin/exporter_v1.hpp>

extern "C" void xtel_test_function_nobody_defines();

namespace {

class dangling_exporter final : public xtel::plugin::exporter_v1 {
  public:
    using exporter_v1::exporter_v1;

    void export_event(const xtel::event&) override { xtel_test_function_nobody_defines(); }
};

}  // namespace

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr auto descriptor =
        xtel::plugin::plugin_creator_v1<dangling_exporter>::describe("unresolved", "1.0.0");
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
