// The registry (xtel/registry/pipeline_choice.hpp, exporter_sets.hpp): NIXL_TELEMETRY_EXPORTER's
// names to the mask of a precompiled pipeline, with the refusals and warnings both factories share.
#include "xtel/registry/pipeline_choice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "core/suggest.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/exporters/output_path.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/exporters/plugin.hpp"
#include "xtel/exporters/prometheus_settings.hpp"
#include "xtel/registry/exporter_sets.hpp"

namespace xtel {

namespace {

/// Upstream NIXL's exporters that xtel does not have, and what to name instead: refused when no
/// plug-in of that name is there, because each makes a promise (one endpoint for every rank,
/// delivery to DOCA) that no exporter here would keep.
struct upstream_exporter {
    std::string_view name;
    std::string_view instead;
};
constexpr upstream_exporter upstream_exporters[] = {
    {"prometheus_mp",
     "it is upstream NIXL's multi-process Prometheus exporter, which xtel does not have: name node "
     "and run one xtel-exporter per node, which serves every rank on one endpoint "
     "(docs/deployment.md)"},
    {"doca",
     "it is upstream NIXL's DOCA exporter, which xtel does not have: name prometheus (one "
     "endpoint per process), or node and run one xtel-exporter per node (every rank on one "
     "endpoint, remote-write or OTLP: docs/deployment.md)"},
};

/// Upstream NIXL's collect-only exporter, which keeps events in process for getXferTelemetry
/// and writes nothing.
constexpr std::string_view nop_exporter = "NOP";

/// Whether `cfg` names NOP alone, which is telemetry off here (said once): xtel has no
/// in-process reader of events, and off writes nothing, as NOP does. Beside other exporters
/// NOP is refused: what it would add to them is nothing, so the list is a mistake.
bool names_collect_only(const config& cfg) {
    const auto is_nop = [](const std::string& n) { return detail::same_keyword(n, nop_exporter); };
    if (std::none_of(cfg.exporters.begin(), cfg.exporters.end(), is_nop)) {
        return false;
    }
    if (cfg.exporters.size() > 1) {
        throw config_error(fmt::format(
            "{}='{}' is invalid: NOP, NIXL's collect-only exporter, writes nothing, so it is not "
            "named beside other exporters; name NOP alone (telemetry off) or the others alone",
            env::exporter, cfg.exporters_string()));
    }
    detail::log(log_level::warning,
                "{}='{}': xtel has no collect-only exporter (no getXferTelemetry reads events in "
                "process), so telemetry is off; name one of {} to export",
                env::exporter, cfg.exporters_string(), fmt::join(builtin_exporter_names, ", "));
    return true;
}

/// Says once each NIXL variable that is set but that none of the exporters `names` reads, so
/// that none is passed over silently.
void warn_unread(const config& cfg, std::span<const std::string> names, bool plugins) {
    if (std::string_view(cfg.output_path_variable) == env::telemetry_dir && !plugins &&
        output_path_use_of(names) != output_path_use::directory) {
        detail::log(log_level::warning,
                    "{}='{}' is not used: none of the exporters named ({}) writes a directory; "
                    "name buffer to keep a flight recorder there",
                    env::telemetry_dir, cfg.output_path, fmt::join(names, ","));
    }
    if (std::find(names.begin(), names.end(), prometheus_exporter::name) == names.end()) {
        for (const char* var : {env::prometheus_port, env::prometheus_local}) {
            if (const auto v = process_env(var)) {
                detail::log(log_level::warning,
                            "{}='{}' is not used: prometheus is not among the exporters named "
                            "({}); name it in {} to serve /metrics",
                            var, parse::escape_controls(*v), fmt::join(names, ","), env::exporter);
            }
        }
    }
}

/// One precompiled pipeline by its exporter set.
struct pipeline_entry {
    std::string exporters;  ///< canonical: sorted, comma-joined
    unsigned mask;          ///< of pipeline_t
};

/// The canonical exporter set of a pipeline mask: its policies' names
/// (xtel/exporters/pipelines.hpp).
std::string exporter_set_of(unsigned mask) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < pipeline_policy_names.size(); ++i) {
        if ((mask & (1u << i)) != 0) {
            names.emplace_back(pipeline_policy_names[i]);
        }
    }
    return canonical_exporter_set(names);
}

/// Every precompiled pipeline by its exporter set, generated from the list of built-in
/// exporters: masks 1 to pipeline_count - 1 (0 is telemetry off, which no exporter set names);
/// "plugin" stands for every name that is not built in (plugin_exporter loads them).
const std::vector<pipeline_entry>& pipelines() {
    static const std::vector<pipeline_entry> table = [] {
        std::vector<pipeline_entry> t;
        for (unsigned mask = 1; mask < pipeline_count; ++mask) {
            t.push_back({exporter_set_of(mask), mask});
        }
        std::sort(t.begin(), t.end(),
                  [](const auto& x, const auto& y) { return x.exporters < y.exporters; });
        return t;
    }();
    return table;
}

std::string plugins_listing(const std::filesystem::path& dir) {
    const auto found = list_plugins(dir);
    return found.empty() ? std::string("none") : fmt::format("{}", fmt::join(found, ", "));
}

/// `cfg` with the built-in exporters spelled as they are declared: their names are keywords,
/// matched ignoring case as every keyword of the variables is (Buffer is buffer). Plugin names
/// name files and are taken as written.
config with_builtin_spelling(const config& cfg) {
    config out = cfg;
    for (auto& n : out.exporters) {
        for (const std::string_view b : builtin_exporter_names) {
            if (detail::same_keyword(n, b)) {
                n = std::string(b);
            }
        }
    }
    for (auto it = out.exporters.begin(); it != out.exporters.end(); ++it) {
        if (std::find(out.exporters.begin(), it, *it) != it) {
            throw config_error(
                fmt::format("{}='{}' is invalid: '{}' is named twice (exporter names are matched "
                            "ignoring case)",
                            env::exporter, cfg.exporters_string(), *it));
        }
    }
    return out;
}

/// The mask of the pipeline an enabled configuration names. Throws config_error when it names a
/// plugin that is not there, or a set of exporters no pipeline was compiled for.
unsigned pipeline_for(const config& cfg) {
    const std::vector<std::string> defaults{config::default_exporter};
    const auto& names = cfg.exporters.empty() ? defaults : cfg.exporters;
    // What NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH means depends on the exporters named: a
    // directory is checked now, before any exporter starts, rather than at the first flush.
    if (!cfg.output_path.empty()) {
        check_output_path(names, cfg.output_path, cfg.output_path_variable);
    }
    // Names that are not built in are plugins: they collapse into the one "plugin" policy.
    std::vector<std::string> policies;
    std::vector<std::string> plugins;
    for (const auto& n : names) {
        if (is_builtin_exporter(n)) {
            policies.push_back(n);
        } else {
            plugins.push_back(n);
        }
    }
    if (!plugins.empty()) {
        policies.emplace_back(plugin_exporter::name);
        for (const auto& p : plugins) {
            if (plugin_available(cfg, p)) {
                continue;
            }
            for (const auto& u : upstream_exporters) {
                if (detail::same_keyword(p, u.name)) {
                    throw config_error(fmt::format("{}='{}' is invalid: '{}': {}", env::exporter,
                                                   cfg.exporters_string(), p, u.instead));
                }
            }
            throw config_error(fmt::format(
                "{}='{}' is invalid: '{}' is not a built-in exporter ({}){} and {}", env::exporter,
                cfg.exporters_string(), p, fmt::join(builtin_exporter_names, ", "),
                did_you_mean(p, builtin_exporter_names),
                cfg.plugin_dir.empty()
                    ? fmt::format("{} is not set, so no plugin can be loaded", env::plugin_dir)
                    : fmt::format("{} has no {} (plugins there: {})", cfg.plugin_dir.string(),
                                  plugin_file_name(p), plugins_listing(cfg.plugin_dir))));
        }
    }
    const auto key = canonical_exporter_set(policies);
    for (const auto& p : pipelines()) {
        if (p.exporters == key) {
            warn_unread(cfg, names, !plugins.empty());
            return p.mask;
        }
    }
    throw config_error(fmt::format(
        "{}='{}' is invalid: no precompiled telemetry pipeline exports to {{{}}}; the exporter "
        "sets that exist are: {} (names in any order, comma-separated; 'plugin' stands for any "
        "number of plugins)",
        env::exporter, cfg.exporters_string(), key, fmt::join(exporter_sets(), "; ")));
}

}  // namespace

std::string canonical_exporter_set(std::span<const std::string> names) {
    std::vector<std::string> sorted(names.begin(), names.end());
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    return fmt::format("{}", fmt::join(sorted, ","));
}

std::vector<std::string> exporter_sets() {
    std::vector<std::string> out;
    for (const auto& p : pipelines()) {
        out.emplace_back(p.exporters);
    }
    return out;
}

namespace detail {

std::string checked_agent_name(std::string name) {
    parse::file_name("agent name", name);
    return name;
}

pipeline_choice choose_pipeline(const config& given) {
    if (!given.enabled || names_collect_only(given)) {
        return {0, given};
    }
    config cfg = with_builtin_spelling(given);
    const unsigned mask = pipeline_for(cfg);
    return {mask, std::move(cfg)};
}

}  // namespace detail

}  // namespace xtel
