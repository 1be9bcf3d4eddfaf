// A plugin whose exporter's constructor throws, as one that cannot reach its sink would.

#include <xtel/plugin/exporter_v1.hpp>

#include <stdexcept>

namespace {

class refusing_exporter final : public xtel::plugin::exporter_v1 {
  public:
    explicit refusing_exporter(const xtel::plugin::init_params_v1& params) : exporter_v1(params) {
        throw std::runtime_error("cannot reach the collector at " + params.output_path.string());
    }

    void export_event(const xtel::event&) override {}
};

}  // namespace

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr auto descriptor =
        xtel::plugin::plugin_creator_v1<refusing_exporter>::describe("ctor_throws", "1.0.0");
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
