// A plugin that appends what happens to it, one line each, to the file named by
// XTEL_TEST_PLUGIN_LOG: init, create <agent> <event limit> <output path>, event <name> <value>,
// flush, destroy <agent>, fini. Tests read it to check the order of calls.
//
// No std::to_string here: its static digit table is a GNU unique symbol, and glibc never unloads
// a library that has one, while the tests check that this one is unloaded.

#include <xtel/plugin/exporter_v1.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

void note(const std::string& line) {
    if (const char* file = std::getenv("XTEL_TEST_PLUGIN_LOG")) {
        std::ofstream(file, std::ios::app) << line << '\n';
    }
}

class recording_exporter final : public xtel::plugin::exporter_v1 {
  public:
    explicit recording_exporter(const xtel::plugin::init_params_v1& params)
        : exporter_v1(params), agent_(params.agent_name) {
        std::ostringstream line;
        line << "create " << agent_ << ' ' << event_limit() << ' ' << params.output_path.string();
        note(line.str());
    }
    ~recording_exporter() override { note("destroy " + agent_); }

    void export_event(const xtel::event& e) override {
        std::ostringstream line;
        line << "event " << e.name_view() << ' ' << e.value;
        note(line.str());
    }

    void flush() override { note("flush " + agent_); }

  private:
    std::string agent_;
};

}  // namespace

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    note("init");
    // Named unlike its file, to show that the loader warns and goes on.
    static constexpr auto descriptor =
        xtel::plugin::plugin_creator_v1<recording_exporter>::describe("recorder", "0.3.1");
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {
    note("fini");
}
