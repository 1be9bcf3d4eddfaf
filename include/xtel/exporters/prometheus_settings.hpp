#pragma once
/// What the Prometheus exporter is configured with: the endpoint's address. The metric model it
/// serves has settings of its own (xtel/metrics/agent_metrics_settings.hpp).

#include <cstdint>
#include <string>

#include "xtel/core/config.hpp"
#include "xtel/core/host_port.hpp"
#include "xtel/exporters/output_path.hpp"

namespace xtel {

/// The Prometheus exporter's own variables (the core ones are in xtel/core/config.hpp).
namespace env {
/// host:port of the Prometheus endpoint; takes precedence over NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH.
inline constexpr const char* prometheus_address = "NIXL_TELEMETRY_PROMETHEUS_ADDRESS";
/// NIXL's port of the endpoint, mapped to the address's port.
inline constexpr const char* prometheus_port = "NIXL_TELEMETRY_PROMETHEUS_PORT";
/// NIXL's choice of host, a boolean: 127.0.0.1 when true, every interface (0.0.0.0) when false.
inline constexpr const char* prometheus_local = "NIXL_TELEMETRY_PROMETHEUS_LOCAL";
}  // namespace env

/// What the Prometheus endpoint is configured with.
struct prometheus_settings {
    /// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH is the endpoint's host:port when nothing that takes it
    /// as a directory is named (xtel/exporters/output_path.hpp).
    static constexpr output_path_use output_path_as = output_path_use::address;
    /// The endpoint's port unless configured.
    static constexpr std::uint16_t default_port = 9464;

    /// 127.0.0.1:9464 unless configured.
    host_port address{std::string(host_port::default_host), default_port};

    /// Reads NIXL_TELEMETRY_PROMETHEUS_ADDRESS, else NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH when
    /// this exporter takes it (takes_output_path: not when an exporter that takes it as a
    /// directory is named), else keeps 127.0.0.1:9464. NIXL's _PROMETHEUS_PORT and
    /// _PROMETHEUS_LOCAL set the port and the host of that address, and must agree with an
    /// address set as well. Throws config_error. The metric model's variables are
    /// metrics::agent_metrics_settings'.
    static prometheus_settings from_env(const config& cfg, const env_lookup& lookup = process_env);
};

}  // namespace xtel
