#pragma once
/// What the Prometheus exporter is configured with: its NIXL_TELEMETRY_PROMETHEUS_* variables
/// and the endpoint's address.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/core/host_port.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/exporters/output_path.hpp"

namespace xtel {

/// The Prometheus exporter's own variables (the core ones are in xtel/core/config.hpp).
namespace env {
/// host:port of the Prometheus endpoint; takes precedence over NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH.
inline constexpr const char* prometheus_address = "NIXL_TELEMETRY_PROMETHEUS_ADDRESS";
/// Histogram bucket upper bounds in microseconds, comma-separated, strictly increasing: upstream
/// NIXL's variable, for every latency histogram.
inline constexpr const char* histogram_buckets_us = "NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US";
/// xtel's earlier name for the same list; NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US wins when both
/// are set.
inline constexpr const char* prometheus_buckets = "NIXL_TELEMETRY_PROMETHEUS_BUCKETS";
/// The metrics builders that make transfer series: comma-separated legacy, comprehensive, time.
inline constexpr const char* prometheus_builders = "NIXL_TELEMETRY_PROMETHEUS_BUILDERS";
/// Series per family before new label sets fold into the family's "other" series.
inline constexpr const char* prometheus_max_series = "NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES";
}  // namespace env

/// Everything the Prometheus exporter is configured with.
struct prometheus_settings {
    /// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH is the endpoint's host:port when nothing that takes it
    /// as a directory is named (xtel/exporters/output_path.hpp).
    static constexpr output_path_use output_path_as = output_path_use::address;
    /// The endpoint's port unless configured.
    static constexpr std::uint16_t default_port = 9464;
    /// Default histogram bounds in microseconds: upstream NIXL's 18, from 10 µs to 10 s.
    static std::vector<double> default_buckets();
    static constexpr std::size_t max_buckets = 64;
    /// Distinct event names beyond the built-in ones that one agent exports; later ones are
    /// ignored and counted, so a backend that invents names cannot grow a scrape without bound.
    static constexpr std::size_t max_dynamic_families = 16384;
    /// The builders the exporter has, by the names NIXL_TELEMETRY_PROMETHEUS_BUILDERS takes.
    static constexpr std::string_view known_builders[] = {"legacy", "comprehensive", "time"};
    /// legacy, comprehensive and time.
    static std::vector<std::string> default_builders();
    static constexpr std::size_t default_max_series = 1000;
    static constexpr std::size_t max_max_series = 1000000;

    /// 127.0.0.1:9464 unless configured.
    host_port address{std::string(host_port::default_host), default_port};
    /// Upper bounds of the latency histograms' buckets, in microseconds (agent_xfer_time_us
    /// shows them so; xtel_transfer_duration_seconds in seconds).
    std::vector<double> buckets = default_buckets();
    /// The hostname label; this machine's name by default.
    std::string hostname;
    /// The builders that make transfer series (a subset of known_builders; all by default).
    std::vector<std::string> builders = default_builders();
    /// Series per family of the builders before new label sets fold into "other".
    std::size_t max_series = default_max_series;
    /// The process's rank (RANK, LOCAL_RANK and the like): the rank and local_rank labels of
    /// every series of the agent, when the environment names them.
    process_rank rank;

    /// Reads NIXL_TELEMETRY_PROMETHEUS_ADDRESS, else NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH when
    /// this exporter takes it (takes_output_path: not when an exporter that takes it as a
    /// directory is named), else keeps 127.0.0.1:9464; NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US (else
    /// NIXL_TELEMETRY_PROMETHEUS_BUCKETS),
    /// NIXL_TELEMETRY_PROMETHEUS_BUILDERS and NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES; the rank
    /// variables (process_rank::from_env, which never throws). Throws config_error.
    static prometheus_settings from_env(const config& cfg, const env_lookup& lookup = process_env);

    /// Parses a list of bucket bounds as NIXL_TELEMETRY_PROMETHEUS_BUCKETS takes it; throws
    /// config_error naming `var`, quoting `value` and saying what is accepted.
    static std::vector<double> parse_buckets(std::string_view var, std::string_view value);

    /// Parses a builder list as NIXL_TELEMETRY_PROMETHEUS_BUILDERS takes it (names of
    /// known_builders, comma-separated, spaces around them ignored, each at most once);
    /// throws config_error naming `var`, quoting `value` and listing the names accepted.
    static std::vector<std::string> parse_builders(std::string_view var, std::string_view value);
};

}  // namespace xtel
