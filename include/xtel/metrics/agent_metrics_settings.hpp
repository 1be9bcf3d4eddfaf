#pragma once
/// What an agent's metric model (xtel/metrics/agent_metrics.hpp) is configured with: the
/// latency histograms' bounds, the builders that make transfer series, the series limit, the
/// hostname and the rank. The pipeline builds one model from them, whichever exporters (prometheus,
/// node) serve it; the variables' names are NIXL's.

#include <cstddef>
#include <cstdint>
#include <optional>
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
/// Which form the latency histograms keep: classic (the bucket bounds above, as NIXL), native
/// (exponential buckets: Prometheus's native histograms, OTLP's exponential histograms) or both.
inline constexpr const char* histogram_kind = "NIXL_TELEMETRY_HISTOGRAM_KIND";
/// The native histograms' starting resolution, -4 to 8: 2^schema buckets per power of two.
inline constexpr const char* histogram_schema = "NIXL_TELEMETRY_HISTOGRAM_SCHEMA";
/// Series per family before new label sets fold into the family's "other" series.
inline constexpr const char* prometheus_max_series = "NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES";
/// Which family sets the agent serves: xtel (the default), nixl or both (docs/metrics.md).
inline constexpr const char* metric_set = "NIXL_TELEMETRY_METRIC_SET";
/// Upstream NIXL's allowlist: comma-separated globs of the metrics served; unset or empty
/// serves every family of the sets chosen.
inline constexpr const char* enabled_metrics = "NIXL_TELEMETRY_ENABLED_METRICS";
/// 1 (or true, yes, on): for one release, the agent also serves each family renamed in this
/// release under its old name (xtel/metrics/renamed_families.hpp), and xtel-exporter, which
/// reads the same variable, its own old refusal families. Unset or 0: the new names only.
inline constexpr const char* compat_names = "NIXL_TELEMETRY_COMPAT_NAMES";
}  // namespace env

namespace metrics {

/// The family sets an agent can serve (docs/metrics.md): upstream NIXL's names, xtel's, or both.
/// Either set comes with the families that describe the telemetry itself (xtel_build_info,
/// xtel_telemetry_exporter_up...).
enum class family_sets : std::uint8_t { xtel = 1, nixl = 2, both = 3 };
std::string_view to_string(family_sets s) noexcept;
constexpr bool has(family_sets s, family_sets one) noexcept {
    return (static_cast<unsigned>(s) & static_cast<unsigned>(one)) != 0;
}

/// The forms a latency histogram can keep (env::histogram_kind).
enum class histogram_kind : std::uint8_t { classic = 1, native = 2, both = 3 };
std::string_view to_string(histogram_kind k) noexcept;

/// What every latency histogram is made with: classic bounds (empty for native only) and
/// whether, from which schema, it keeps native buckets.
struct latency_shape {
    std::vector<double> bounds;
    bool native = false;
    std::int8_t native_schema = 0;
};

/// Upstream NIXL's metric names as NIXL_TELEMETRY_ENABLED_METRICS matches them: the events the
/// NIXL set's families derive from, and one agent_err_<status> per agent_errors_total status.
inline constexpr std::string_view nixl_metric_names[] = {
    "agent_tx_bytes",
    "agent_rx_bytes",
    "agent_tx_requests_num",
    "agent_rx_requests_num",
    "agent_memory_registered",
    "agent_memory_deregistered",
    "agent_xfer_time",
    "agent_xfer_post_time",
    "agent_telemetry_events_dropped",
    "agent_err_not_posted",
    "agent_err_invalid_param",
    "agent_err_backend",
    "agent_err_not_found",
    "agent_err_mismatch",
    "agent_err_not_allowed",
    "agent_err_repost_active",
    "agent_err_unknown",
    "agent_err_not_supported",
    "agent_err_remote_disconnect",
    "agent_err_canceled",
    "agent_err_no_telemetry",
};

/// Whether the glob `pattern` (`*`, `?`, `[...]`, as POSIX fnmatch) matches all of `name`.
bool glob_matches(std::string_view pattern, std::string_view name);

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
    /// The builders of the sets `s` serves: legacy for nixl, comprehensive for xtel. `time`
    /// only when named: the latency histograms' _sum and _count say what it would.
    static std::vector<std::string> default_builders(family_sets s = family_sets::xtel);
    static constexpr std::size_t default_max_series = 1000;
    static constexpr std::size_t max_max_series = 1000000;

    /// Upper bounds of the latency histograms' buckets, in microseconds (agent_xfer_time_us
    /// shows them so; xtel_transfer_duration_seconds in seconds).
    std::vector<double> buckets = default_buckets();
    /// The latency histograms' form (NIXL_TELEMETRY_HISTOGRAM_KIND): classic by default, so that
    /// a NIXL deployment's bodies and the agent's memory stay as they were; native buckets are
    /// seen only by a Prometheus that asks for protobuf, by remote-write and by OTLP.
    histogram_kind histograms = histogram_kind::classic;
    /// Their native schema (NIXL_TELEMETRY_HISTOGRAM_SCHEMA): 3 by default, at most 4.3% off,
    /// Prometheus's client libraries' usual resolution.
    int histogram_schema = 3;
    /// The hostname label; this machine's name by default.
    std::string hostname;
    /// The family sets served (NIXL_TELEMETRY_METRIC_SET; xtel by default).
    family_sets sets = family_sets::xtel;
    /// Globs of the metrics served (NIXL_TELEMETRY_ENABLED_METRICS): a family is served when
    /// one matches its name or, in the NIXL set, the name of the event it derives from
    /// (agent_xfer_time: agent_xfer_time_total, agent_xfer_time and agent_xfer_time_us;
    /// agent_err_backend: agent_errors_total{status="backend"}). Empty: every family.
    std::vector<std::string> enabled_metrics;
    /// The builders that make transfer series (a subset of known_builders); unset, those of
    /// `sets` (default_builders).
    std::optional<std::vector<std::string>> builders;
    /// Series per family of the builders before new label sets fold into "other".
    std::size_t max_series = default_max_series;
    /// The process's rank (RANK, LOCAL_RANK and the like): the rank and local_rank labels of
    /// every series of the agent, when the environment names them.
    process_rank rank;
    /// Whether the families renamed in this release are served under their old names too
    /// (NIXL_TELEMETRY_COMPAT_NAMES, xtel/metrics/renamed_families.hpp); off by default.
    bool compat_names = false;

    /// The shape of the latency histograms these settings make.
    latency_shape latency() const;

    /// Reads NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US (else NIXL_TELEMETRY_PROMETHEUS_BUCKETS),
    /// NIXL_TELEMETRY_HISTOGRAM_KIND, NIXL_TELEMETRY_HISTOGRAM_SCHEMA,
    /// NIXL_TELEMETRY_PROMETHEUS_BUILDERS, NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES,
    /// NIXL_TELEMETRY_METRIC_SET, NIXL_TELEMETRY_ENABLED_METRICS and
    /// NIXL_TELEMETRY_COMPAT_NAMES, each once. Unset
    /// NIXL_TELEMETRY_METRIC_SET is xtel, unless the allowlist names a metric of the NIXL set
    /// (a NIXL deployment's setting): then both sets, which the allowlist picks from;
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
    /// Parses NIXL_TELEMETRY_HISTOGRAM_KIND's value (classic, native or both, any letter case).
    static histogram_kind parse_histogram_kind(std::string_view var, std::string_view value);
    /// Parses NIXL_TELEMETRY_METRIC_SET's value (xtel, nixl or both, any letter case).
    static family_sets parse_sets(std::string_view var, std::string_view value);
    /// Parses an allowlist as NIXL_TELEMETRY_ENABLED_METRICS takes it: comma-separated globs
    /// (`*`, `?`, `[...]`) of metric-name characters, spaces around them and empty items
    /// ignored.
    static std::vector<std::string> parse_enabled_metrics(std::string_view var,
                                                          std::string_view value);
};

}  // namespace metrics
}  // namespace xtel
