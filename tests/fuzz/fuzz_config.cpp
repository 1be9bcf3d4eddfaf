// Fuzz target: every NIXL_TELEMETRY_* variable at once, from arbitrary bytes, read by the core
// configuration and then by each built-in exporter's settings. The only acceptable failure is
// xtel::config_error; anything else escaping is a finding.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "xtel/core/config.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/exporters/buffer_settings.hpp"
#include "xtel/exporters/prometheus_settings.hpp"
#include "xtel/metrics/agent_metrics_settings.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const char* const vars[] = {
        xtel::env::enable,
        xtel::env::buffer_size,
        xtel::env::run_interval,
        xtel::env::exporter,
        xtel::env::plugin_dir,
        xtel::env::output_path,
        xtel::env::timing_sample,
        xtel::env::prometheus_address,
        // Past the first byte's eight bits: set whenever the input has a line for them.
        xtel::env::prometheus_buckets,
        xtel::env::prometheus_builders,
        xtel::env::prometheus_max_series,
        // Upstream NIXL's, mapped onto the above (docs/configuration.md, "NIXL's variables").
        xtel::env::telemetry_dir,
        xtel::env::nixl_plugin_dir,
        xtel::env::prometheus_port,
        xtel::env::prometheus_local,
        xtel::env::rank_env,
        // The metric surface (docs/metrics.md, "Choosing the surface").
        xtel::env::metric_set,
        xtel::env::enabled_metrics,
        xtel::env::histogram_buckets_us,
    };
    // Values are separated by '\n'; the first byte chooses which of the first eight variables
    // are set at all.
    std::map<std::string, std::string> table;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const unsigned mask = size > 0 ? static_cast<unsigned char>(input[0]) : 0;
    std::string_view rest = size > 0 ? input.substr(1) : input;
    for (std::size_t i = 0; i < std::size(vars); ++i) {
        const bool has_line = !rest.empty();
        const auto nl = rest.find('\n');
        const auto value = rest.substr(0, nl);
        if (i < 8 ? (mask & (1u << i)) != 0 : has_line) {
            table[vars[i]] = std::string(value);
        }
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    }
    const auto lookup = [&](std::string_view name) -> std::optional<std::string> {
        if (const auto it = table.find(std::string(name)); it != table.end()) {
            return it->second;
        }
        return std::nullopt;
    };
    xtel::config c;
    try {
        c = xtel::config::from_env(lookup);
    } catch (const xtel::config_error&) {
        return 0;
    }
    if (c.enabled && (c.buffer_size == 0 || c.run_interval.count() == 0 || c.exporters.empty() ||
                      c.timing_sample == 0)) {
        __builtin_trap();  // accepted values must be usable
    }
    if (!c.enabled) {
        return 0;
    }
    try {
        (void)xtel::buffer_settings::from_env(c, lookup);
    } catch (const xtel::config_error&) {
    }
    try {
        (void)xtel::prometheus_settings::from_env(c, lookup);
    } catch (const xtel::config_error&) {
    }
    try {
        const auto s = xtel::metrics::agent_metrics_settings::from_env(lookup);
        if (s.buckets.empty() || s.max_series == 0) {
            __builtin_trap();
        }
        for (const auto& glob : s.enabled_metrics) {
            if (glob.empty()) {
                __builtin_trap();  // empty items are dropped
            }
            (void)xtel::metrics::glob_matches(glob, "agent_xfer_time");
        }
    } catch (const xtel::config_error&) {
    }
    return 0;
}
