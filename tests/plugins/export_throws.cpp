// A plugin whose export_event throws for some events: a std::exception for names that start with
// "bad", an int for names that start with "odd". The others are written as "<name> <value>"
// lines to <output path>/<agent name>.log, so a test sees which events got through.

#include <xtel/plugin/exporter_v1.hpp>

#include <fstream>
#include <stdexcept>
#include <string>

namespace {

class picky_exporter final : public xtel::plugin::exporter_v1 {
  public:
    explicit picky_exporter(const xtel::plugin::init_params_v1& params)
        : exporter_v1(params), out_(params.output_path / (params.agent_name + ".log")) {}

    void export_event(const xtel::event& e) override {
        const std::string_view name = e.name_view();
        if (name.substr(0, 3) == "bad") {
            throw std::runtime_error("refusing " + std::string(name));
        }
        if (name.substr(0, 3) == "odd") {
            throw 42;
        }
        out_ << name << ' ' << e.value << '\n';
    }

    void flush() override { out_.flush(); }

  private:
    std::ofstream out_;
};

}  // namespace

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr auto descriptor =
        xtel::plugin::plugin_creator_v1<picky_exporter>::describe("export_throws", "1.0.0");
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {}
