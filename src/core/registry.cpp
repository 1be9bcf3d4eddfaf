#include "xtel/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "xtel/error.hpp"
#include "xtel/exporters/plugin.hpp"

namespace xtel {

namespace {

using agent_factory = std::unique_ptr<agent> (*)(std::string, const config&, const agent_options&);

template <class Telemetry>
std::unique_ptr<agent> make(std::string name, const config& cfg, const agent_options& opts) {
    return std::make_unique<basic_agent<Telemetry>>(std::move(name), cfg, opts);
}

struct pipeline_entry {
    std::string_view exporters;  ///< canonical: sorted, comma-joined
    agent_factory make;
};

// The precompiled pipelines, one line each. To add one: instantiate basic_agent<T> in
// src/agent.cpp (with its extern template in xtel/agent.hpp), then add {"<sorted names>",
// &make<T>} here, e.g. {"buffer,prometheus", &make<telemetry<buffer_exporter,
// prometheus_exporter>>}. The static_assert below keeps the keys canonical.
// "plugin" stands for every name that is not built in: those are loaded by plugin_exporter.
constexpr pipeline_entry pipelines[] = {
    {"buffer", &make<telemetry<buffer_exporter>>},
    {"buffer,plugin", &make<telemetry<buffer_exporter, plugin_exporter>>},
    {"buffer,prometheus", &make<telemetry<buffer_exporter, prometheus_exporter>>},
    {"plugin", &make<telemetry<plugin_exporter>>},
    {"prometheus", &make<telemetry<prometheus_exporter>>},
};

constexpr bool is_canonical(std::string_view set) {
    std::string_view previous;
    while (!set.empty()) {
        const auto comma = set.find(',');
        const std::string_view name = set.substr(0, comma);
        if (name.empty() || (!previous.empty() && !(previous < name))) {
            return false;
        }
        previous = name;
        set = comma == std::string_view::npos ? std::string_view{} : set.substr(comma + 1);
    }
    return !previous.empty();
}

constexpr bool all_canonical() {
    for (const auto& p : pipelines) {
        if (!is_canonical(p.exporters)) {
            return false;
        }
    }
    return true;
}
static_assert(all_canonical(), "registry keys must be sorted, comma-joined exporter names");

std::string plugins_listing(const std::filesystem::path& dir) {
    const auto found = list_plugins(dir);
    return found.empty() ? std::string("none") : fmt::format("{}", fmt::join(found, ", "));
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
    for (const auto& p : pipelines) {
        out.emplace_back(p.exporters);
    }
    return out;
}

std::unique_ptr<agent> make_agent(std::string name, const config& cfg, agent_options opts) {
    if (!cfg.enabled) {
        return make<telemetry<>>(std::move(name), cfg, opts);
    }
    const std::vector<std::string> defaults{config::default_exporter};
    const auto& names = cfg.exporters.empty() ? defaults : cfg.exporters;
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
        policies.emplace_back("plugin");
        for (const auto& p : plugins) {
            if (!plugin_available(cfg, p)) {
                throw config_error(fmt::format(
                    "{}='{}' is invalid: '{}' is not a built-in exporter ({}) and {}",
                    env::exporter, cfg.exporters_string(), p, fmt::join(builtin_exporters, ", "),
                    cfg.plugin_dir.empty()
                        ? fmt::format("{} is not set, so no plugin can be loaded", env::plugin_dir)
                        : fmt::format("{} has no {} (plugins there: {})", cfg.plugin_dir.string(),
                                      plugin_file_name(p), plugins_listing(cfg.plugin_dir))));
            }
        }
    }
    const auto key = canonical_exporter_set(policies);
    for (const auto& p : pipelines) {
        if (p.exporters == key) {
            return p.make(std::move(name), cfg, opts);
        }
    }
    throw config_error(fmt::format(
        "{}='{}' is invalid: no precompiled telemetry pipeline exports to {{{}}}; the exporter "
        "sets that exist are: {} (names in any order, comma-separated; 'plugin' stands for any "
        "number of plugins)",
        env::exporter, cfg.exporters_string(), key, fmt::join(exporter_sets(), "; ")));
}

std::unique_ptr<agent> make_agent(std::string name) {
    return make_agent(std::move(name), config::from_env());
}

}  // namespace xtel
