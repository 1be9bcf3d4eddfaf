#pragma once
/// What an agent's metric model (xtel/metrics/agent_metrics.hpp) is configured with: the
/// latency histograms' bounds, the builders that make transfer series, the series limit, the
/// hostname and the rank. Every exporter that serves the model (prometheus, node) reads the
/// same variables; their names are NIXL's.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/core/rank.hpp"

namespace xtel {

/// The metric model's variables (the core ones are in xtel/core/config.hpp).
namespace env {
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

namespace metrics {

/// Everything an agent's metric model is configured with.
struct agent_metrics_settings {
    /// Default histogram bounds in microseconds: upstream NIXL's 18, from 10 µs to 10 s.
    static std::vector<double> default_buckets();
    static constexpr std::size_t max_buckets = 64;
    /// Distinct event names beyond the built-in ones that one agent exports; later ones are
    /// ignored and counted, so a backend that invents names cannot grow a scrape without bound.
    static constexpr std::size_t max_dynamic_families = 16384;
    /// The builders the model has, by the names NIXL_TELEMETRY_PROMETHEUS_BUILDERS takes.
    static constexpr std::string_view known_builders[] = {"legacy", "comprehensive", "time"};
    /// legacy, comprehensive and time.
    static std::vector<std::string> default_builders();
    static constexpr std::size_t default_max_series = 1000;
    static constexpr std::size_t max_max_series = 1000000;

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

    /// Reads NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US (else NIXL_TELEMETRY_PROMETHEUS_BUCKETS),
    /// NIXL_TELEMETRY_PROMETHEUS_BUILDERS and NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES, each once;
    /// this machine's name; the rank variables (process_rank::from_env, which never throws).
    /// Throws config_error.
    static agent_metrics_settings from_env(const env_lookup& lookup = process_env);

    /// Parses a list of bucket bounds as NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US takes it; throws
    /// config_error naming `var`, quoting `value` and saying what is accepted.
    static std::vector<double> parse_buckets(std::string_view var, std::string_view value);

    /// Parses a builder list as NIXL_TELEMETRY_PROMETHEUS_BUILDERS takes it (names of
    /// known_builders, comma-separated, spaces around them ignored, each at most once);
    /// throws config_error naming `var`, quoting `value` and listing the names accepted.
    static std::vector<std::string> parse_builders(std::string_view var, std::string_view value);
};

}  // namespace metrics
}  // namespace xtel
