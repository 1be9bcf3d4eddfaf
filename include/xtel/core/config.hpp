#pragma once
/// Telemetry configuration from the NIXL_TELEMETRY_* environment variables.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xtel {

/// The core variables, by name: those config::from_env reads. An exporter's own variables are
/// declared with its settings (xtel/exporters/prometheus_settings.hpp: env::prometheus_*).
namespace env {
inline constexpr const char* enable = "NIXL_TELEMETRY_ENABLE";
inline constexpr const char* buffer_size = "NIXL_TELEMETRY_BUFFER_SIZE";
inline constexpr const char* run_interval = "NIXL_TELEMETRY_RUN_INTERVAL";
inline constexpr const char* exporter = "NIXL_TELEMETRY_EXPORTER";
inline constexpr const char* plugin_dir = "NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR";
/// Read here, meant by the exporters: which one takes it is decided in
/// xtel/exporters/output_path.hpp.
inline constexpr const char* output_path = "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH";
/// xtel's own: how an agent samples transfer times (config::timing_sample).
inline constexpr const char* timing_sample = "NIXL_TELEMETRY_TIMING_SAMPLE";
/// NIXL's name for the flight recorder's directory: mapped to output_path, which only an
/// exporter that takes a directory then reads (config::output_path_variable).
inline constexpr const char* telemetry_dir = "NIXL_TELEMETRY_DIR";
/// NIXL's directory of every plug-in, its backends' too: where exporter plug-ins are looked for
/// when plugin_dir is unset.
inline constexpr const char* nixl_plugin_dir = "NIXL_PLUGIN_DIR";
/// Upstream NIXL's variables of exporters xtel does not have (prometheus_mp, DOCA, the example
/// CSV plug-in): read only to say, once, what to use instead (docs/configuration.md).
inline constexpr const char* multiproc_dir = "NIXL_TELEMETRY_MULTIPROC_DIR";
inline constexpr const char* mp_stale_ttl = "NIXL_TELEMETRY_MP_STALE_TTL";
inline constexpr const char* csv_file = "NIXL_TELEMETRY_CSV_FILE";
inline constexpr const char* doca_backends = "NIXL_TELEMETRY_DOCA_BACKENDS";
inline constexpr const char* doca_ipc_sockets_dir = "NIXL_TELEMETRY_DOCA_IPC_SOCKETS_DIR";
inline constexpr const char* doca_prometheus_port = "NIXL_TELEMETRY_DOCA_PROMETHEUS_PORT";
inline constexpr const char* doca_prometheus_local = "NIXL_TELEMETRY_DOCA_PROMETHEUS_LOCAL";
}  // namespace env

/// Looks a variable up; std::nullopt when unset. Tests pass their own table.
using env_lookup = std::function<std::optional<std::string>(std::string_view)>;

/// The process environment (getenv).
std::optional<std::string> process_env(std::string_view name);

struct config {
    static constexpr std::size_t default_buffer_size = 4096;
    static constexpr std::size_t max_buffer_size = std::size_t{1} << 24;
    static constexpr std::chrono::milliseconds default_run_interval{100};
    static constexpr std::chrono::milliseconds max_run_interval{3'600'000};
    static constexpr const char* default_exporter = "buffer";
    static constexpr std::uint32_t default_timing_sample = 256;
    static constexpr std::uint32_t max_timing_sample = 1u << 20;

    bool enabled = false;
    /// Events the flight recorder holds; handed to plugins as well (NIXL defines it for all).
    std::size_t buffer_size = default_buffer_size;
    /// How often the flusher hands batches to the exporters.
    std::chrono::milliseconds run_interval = default_run_interval;
    /// Exporter names, in the order given; {"buffer"} when enabled and unset.
    std::vector<std::string> exporters;
    /// Where third-party exporter plugins are looked for; empty when unset. Core rather than the
    /// plugin exporter's: the registry reads it to tell a plugin from an unknown name before it
    /// chooses a pipeline.
    std::filesystem::path plugin_dir;
    /// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH as given; empty when unset. What it means is the
    /// business of the exporter that takes it (xtel/exporters/output_path.hpp), which applies its
    /// own default when it is empty or taken by another; plugins are handed it as it is.
    std::string output_path;
    /// The variable output_path came from, for messages and for who takes it: env::output_path,
    /// or env::telemetry_dir, which names a directory only (xtel/exporters/output_path.hpp).
    const char* output_path_variable = env::output_path;
    /// How an agent times transfers: N times the first N transfers after each flush and one
    /// in N after those; 1 times every transfer. Bytes and requests are counted exactly
    /// whatever N is; transfers that are not timed are reported in batches (docs/events.md).
    std::uint32_t timing_sample = default_timing_sample;

    /// Reads and validates the core variables (env:: above); each exporter reads its own when it
    /// is built (its settings' from_env). Disabled telemetry reads nothing else, so a stale
    /// value cannot stop an agent that does not use it. NIXL_TELEMETRY_DIR and NIXL_PLUGIN_DIR
    /// are mapped to output_path and plugin_dir; upstream variables of exporters xtel does not
    /// have are logged once each with what to use instead. Throws config_error.
    static config from_env(const env_lookup& lookup = process_env);

    /// The exporter list joined with ',' ("buffer,prometheus").
    std::string exporters_string() const;
};

}  // namespace xtel
