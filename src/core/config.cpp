// The core variables (xtel/config.hpp). What an exporter's variables mean is the exporter's
// business: its settings read them, and xtel/output_path.hpp says which exporter takes
// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH.
#include "xtel/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "xtel/output_path.hpp"
#include "xtel/parse.hpp"

namespace xtel {

std::optional<std::string> process_env(std::string_view name) {
    const std::string key(name);
    if (const char* v = std::getenv(key.c_str())) {
        return std::string(v);
    }
    return std::nullopt;
}

config config::from_env(const env_lookup& lookup) {
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
        check_output_path(c.exporters, *v);
        c.output_path = *v;
    }
    return c;
}

std::string config::exporters_string() const {
    return fmt::format("{}", fmt::join(exporters, ","));
}

}  // namespace xtel
