// The core variables (xtel/core/config.hpp). What an exporter's variables mean is the exporter's
// business: its settings read them, and xtel/exporters/output_path.hpp says which exporter takes
// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH, which the registry checks once it knows the exporters
// (make_agent, make_telemetry): core reads the variables and knows no exporter.
#include "xtel/core/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <system_error>

#include "core/log.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"
#include "xtel/core/parse.hpp"

namespace xtel {

namespace {

/// An upstream variable that configures an exporter xtel does not have, and what to use instead.
struct unserved_variable {
    const char* name;
    const char* instead;
};

// Logged rather than refused: upstream reads them only for its prometheus_mp, DOCA and example
// CSV exporters, which an agent here cannot be running (NIXL_TELEMETRY_EXPORTER refuses those
// names), so its transfers are the same either way; what the variable asked for is said once.
constexpr const char* multiprocess_instead =
    "xtel has no multi-process store; name the node exporter (NIXL_TELEMETRY_EXPORTER=node) and "
    "run one xtel-exporter per node, which serves every rank on one endpoint "
    "(docs/deployment.md)";
constexpr const char* doca_instead =
    "xtel has no DOCA exporter; serve Prometheus with NIXL_TELEMETRY_EXPORTER=prometheus, or "
    "name node and run one xtel-exporter per node, which serves every rank and can push by "
    "remote-write or OTLP (docs/deployment.md)";
constexpr unserved_variable unserved_variables[] = {
    {env::multiproc_dir, multiprocess_instead},
    {env::mp_stale_ttl,
     "how long a stopped agent is still served is xtel-exporter's --stale-ttl "
     "(docs/deployment.md)"},
    {env::csv_file,
     "it configures upstream's example CSV plug-in; xtel's (examples/plugins/csv) writes "
     "<NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH>/<agent name>.csv"},
    {env::doca_backends, doca_instead},
    {env::doca_ipc_sockets_dir, doca_instead},
    {env::doca_prometheus_port, doca_instead},
    {env::doca_prometheus_local, doca_instead},
};

/// NIXL_TELEMETRY_DIR, NIXL's name for the flight recorder's directory, as output_path: the
/// same directory as NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH or none, since two directories for one
/// file would leave one of them silently unused.
void map_telemetry_dir(config& c, const std::string& dir) {
    if (dir.empty()) {
        parse::fail(env::telemetry_dir, dir, "expected the path of an existing directory");
    }
    if (c.output_path.empty()) {
        c.output_path = dir;
        c.output_path_variable = env::telemetry_dir;
    } else if (c.output_path != dir) {
        parse::fail(env::telemetry_dir, dir,
                    fmt::format("{}='{}' is set too and names another place; both name the "
                                "flight recorder's directory: set one of them, or both to the "
                                "same directory",
                                env::output_path, c.output_path));
    }
}

/// NIXL_PLUGIN_DIR as the plug-in directory when xtel's own is unset. NIXL deployments set it
/// for their backends whether or not telemetry uses it, so one that is not a directory is said
/// and passed over rather than stopping the agent.
void map_nixl_plugin_dir(config& c, const std::string& dir) {
    std::error_code ec;
    if (!dir.empty() && std::filesystem::is_directory(dir, ec)) {
        c.plugin_dir = dir;
        return;
    }
    detail::log(log_level::warning,
                "{}='{}' is not an existing directory: no telemetry exporter plug-in is looked "
                "for there ({} names xtel's plug-in directory)",
                env::nixl_plugin_dir, parse::escape_controls(dir), env::plugin_dir);
}

}  // namespace

std::optional<std::string> process_env(std::string_view name) {
    const std::string key(name);
    if (const char* v = std::getenv(key.c_str())) {
        return std::string(v);
    }
    return std::nullopt;
}

config config::from_env(const env_lookup& lookup) {
    // XTEL_LOG_LEVEL is read with the configuration, so that a value it cannot be is said now
    // (once per process), even by a program that logs nothing else.
    (void)log_enabled(log_level::error);
    config c;
    if (const auto v = lookup(env::enable)) {
        c.enabled = parse::boolean(env::enable, *v);
    }
    if (!c.enabled) {
        return c;
    }
    if (const auto v = lookup(env::buffer_size)) {
        c.buffer_size = parse::unsigned_integer(env::buffer_size, *v, 1, max_buffer_size);
    }
    if (const auto v = lookup(env::run_interval)) {
        c.run_interval = std::chrono::milliseconds(parse::unsigned_integer(
            env::run_interval, *v, 1, static_cast<std::uint64_t>(max_run_interval.count())));
    }
    if (const auto v = lookup(env::timing_sample)) {
        c.timing_sample = static_cast<std::uint32_t>(
            parse::unsigned_integer(env::timing_sample, *v, 1, max_timing_sample));
    }
    if (const auto v = lookup(env::exporter)) {
        c.exporters = parse::name_list(env::exporter, *v);
    } else {
        c.exporters = {default_exporter};
    }
    if (const auto v = lookup(env::plugin_dir)) {
        c.plugin_dir = parse::existing_directory(env::plugin_dir, *v);
    } else if (const auto nixl = lookup(env::nixl_plugin_dir)) {
        map_nixl_plugin_dir(c, *nixl);
    }
    if (const auto v = lookup(env::output_path)) {
        if (v->empty()) {
            // What the value names depends on the exporters (xtel/exporters/output_path.hpp),
            // which core does not know; an empty one names nothing for any of them.
            parse::fail(env::output_path, *v,
                        "expected a non-empty value (a directory or an address, as the exporters "
                        "named take it: docs/configuration.md)");
        }
        c.output_path = *v;
    }
    if (const auto v = lookup(env::telemetry_dir)) {
        map_telemetry_dir(c, *v);
    }
    for (const auto& u : unserved_variables) {
        if (const auto v = lookup(u.name)) {
            detail::log(log_level::warning, "{}='{}' is not read by xtel: {}", u.name,
                        parse::escape_controls(*v), u.instead);
        }
    }
    return c;
}

std::string config::exporters_string() const {
    return fmt::format("{}", fmt::join(exporters, ","));
}

}  // namespace xtel
