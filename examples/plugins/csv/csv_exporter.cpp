// The CSV exporter plugin: one row per telemetry event, appended to
// <NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH>/<agent name>.csv. The worked example of docs/plugins.md.
//
// Format: a header line, `timestamp_us,category,event_name,value`, written when the file is new
// or empty; then one row per event: microseconds since the Unix epoch, the category's upper-case
// name (TRANSFER), the event name (quoted as RFC 4180 says when it holds ',', '"' or a line
// break), and the value, all integers in decimal.

#include <xtel/plugin/exporter_v1.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace {

void write_field(std::ostream& out, std::string_view field) {
    if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
        out << field;
        return;
    }
    out << '"';
    for (const char c : field) {
        if (c == '"') {
            out << '"';
        }
        out << c;
    }
    out << '"';
}

/// <output path>/<agent name>.csv; throws when either cannot make a file path.
std::filesystem::path csv_path(const xtel::plugin::init_params_v1& params) {
    if (params.output_path.empty()) {
        throw std::invalid_argument(
            "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH is not set: the csv exporter writes "
            "<that directory>/<agent name>.csv");
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(params.output_path, ec)) {
        throw std::invalid_argument("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH='" +
                                    params.output_path.string() +
                                    "' is not a directory: the csv exporter writes "
                                    "<that directory>/<agent name>.csv");
    }
    const std::string& agent = params.agent_name;
    if (agent.empty() || agent == "." || agent == ".." ||
        agent.find_first_of("/\\") != std::string::npos) {
        throw std::invalid_argument("agent name '" + agent + "' cannot name a file");
    }
    return params.output_path / (agent + ".csv");
}

class csv_exporter final : public xtel::plugin::exporter_v1 {
  public:
    explicit csv_exporter(const xtel::plugin::init_params_v1& params)
        : exporter_v1(params), path_(csv_path(params)) {
        // Appended, not replaced: a restarted agent adds to what its previous run wrote.
        std::error_code ec;
        const bool fresh =
            !std::filesystem::exists(path_, ec) || std::filesystem::file_size(path_, ec) == 0;
        file_.open(path_, std::ios::out | std::ios::app);
        if (!file_) {
            throw std::runtime_error("cannot open " + path_.string() + " for appending");
        }
        if (fresh) {
            file_ << "timestamp_us,category,event_name,value\n";
        }
        check("writing");
    }

    void export_event(const xtel::event& e) override {
        file_ << e.timestamp_us << ',' << xtel::to_string(e.cat) << ',';
        write_field(file_, e.name_view());
        file_ << ',' << e.value << '\n';
        check("writing");
    }

    // Rows are buffered between flush rounds, so a row costs no system call of its own.
    void flush() override {
        file_.flush();
        check("flushing");
    }

  private:
    /// Throws when the stream has failed; clears it first, so that the next event can try again
    /// (a disk that was full may have room later).
    void check(const char* what) {
        if (!file_) {
            file_.clear();
            throw std::runtime_error(std::string(what) + " " + path_.string() + " failed");
        }
    }

    const std::filesystem::path path_;
    std::ofstream file_;
};

}  // namespace

extern "C" XTEL_PLUGIN_EXPORT const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init() {
    static constexpr auto descriptor =
        xtel::plugin::plugin_creator_v1<csv_exporter>::describe("csv", "1.0.0");
    return &descriptor;
}

extern "C" XTEL_PLUGIN_EXPORT void nixl_telemetry_plugin_fini() {
    // Nothing global to release: each exporter closes its own file.
}
