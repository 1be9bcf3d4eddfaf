#pragma once
/// What the buffer exporter (the flight recorder) is configured with.

#include <filesystem>

#include "xtel/core/config.hpp"
#include "xtel/exporters/output_path.hpp"

namespace xtel {

/// The flight recorder's directory. Its size, NIXL_TELEMETRY_BUFFER_SIZE, stays in config:
/// NIXL defines it for every exporter, and plugins are handed it too
/// (plugin::init_params_v1::buffer_size).
struct buffer_settings {
    /// NIXL's meaning of NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH: the directory of the recorder files.
    static constexpr output_path_use output_path_as = output_path_use::directory;
    static constexpr const char* default_directory = "/dev/shm";

    /// Where `<agent name>` is created.
    std::filesystem::path directory{default_directory};

    /// The directory is NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH (cfg.output_path) when set, which must
    /// exist, else default_directory. The buffer exporter reads no variable of its own, so
    /// `lookup` is not consulted. Throws config_error.
    static buffer_settings from_env(const config& cfg, const env_lookup& lookup = process_env);
};

}  // namespace xtel
