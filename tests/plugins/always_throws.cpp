// A plugin whose exporter fails at every call, as one whose disk is full or whose collector is
// gone would: export_event and flush throw a std::exception each time.

#include <xtel/plugin/exporter_v1.hpp>

#include <stdexcept>

namespace {

class failing_exporter final : public xtel::plugin::exporter_v1 {
  public:
    using exporter_v1::exporter_v1;

    void export_event(const xtel::event&) override {
        throw std::runtime_error("no space left on the collector");
    }

    void flush() override { throw std::runtime_error("no space left on the collector"); }
};

}  // namespace

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr auto descriptor =
        xtel::plugin::plugin_creator_v1<failing_exporter>::describe("always_throws", "1.0.0");
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
