// The core variables (xtel/core/config.hpp). What an exporter's variables mean is the exporter's
// business: its settings read them, and xtel/exporters/output_path.hpp says which exporter takes
// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH, which the registry checks once it knows the exporters
// (make_agent, make_telemetry): core reads the variables and knows no exporter.
#include "xtel/core/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "xtel/core/log.hpp"
#include "xtel/core/parse.hpp"

namespace xtel {

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
    return c;
}

std::string config::exporters_string() const {
    return fmt::format("{}", fmt::join(exporters, ","));
}

}  // namespace xtel
