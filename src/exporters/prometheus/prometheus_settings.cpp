// The Prometheus exporter's settings: the endpoint's address.
#include "xtel/exporters/prometheus_settings.hpp"

#include <fmt/format.h>

#include <limits>
#include <optional>
#include <string_view>

#include "core/log.hpp"
#include "xtel/core/parse.hpp"

namespace xtel {

namespace {

/// Whether `host` is the loopback that NIXL_TELEMETRY_PROMETHEUS_LOCAL=y asks for.
bool is_loopback(std::string_view host) {
    return host.starts_with("127.") || host == "::1" || host == "localhost";
}

/// Whether `host` is every interface, which NIXL_TELEMETRY_PROMETHEUS_LOCAL=n asks for.
bool is_any(std::string_view host) {
    return host == "0.0.0.0" || host == "::";
}

/// What `_PORT` and `_LOCAL` ask of the address `given` (the address variable's, or the output
/// path's), as "VAR='value'" pairs for a message; empty when they ask nothing it does not have.
std::string disagreement(const host_port& given,
                         const std::optional<std::string>& port_value,
                         std::optional<std::uint16_t> port,
                         const std::optional<std::string>& local_value,
                         std::optional<bool> local) {
    std::string out;
    if (port && *port != given.port) {
        out += fmt::format("{}='{}'", env::prometheus_port, *port_value);
    }
    if (local && (*local ? !is_loopback(given.host) : !is_any(given.host))) {
        out += fmt::format("{}{}='{}'", out.empty() ? "" : " and ", env::prometheus_local,
                           *local_value);
    }
    return out;
}

}  // namespace

prometheus_settings prometheus_settings::from_env(const config& cfg, const env_lookup& lookup) {
    prometheus_settings s;
    // The address as xtel's variables give it: its own, else the output path's.
    std::optional<host_port> given;
    const char* given_by = env::prometheus_address;
    if (const auto v = lookup(env::prometheus_address)) {
        given = host_port::parse(env::prometheus_address, *v);
    } else if (takes_output_path(cfg, output_path_as)) {
        given = host_port::parse(env::output_path, cfg.output_path);
        given_by = env::output_path;
    }
    // NIXL's two variables for the same address: mapped onto it.
    const auto port_value = lookup(env::prometheus_port);
    const auto local_value = lookup(env::prometheus_local);
    std::optional<std::uint16_t> port;
    std::optional<bool> local;
    if (port_value) {
        port = static_cast<std::uint16_t>(parse::unsigned_integer(
            env::prometheus_port, *port_value, 0, std::numeric_limits<std::uint16_t>::max()));
    }
    if (local_value) {
        local = parse::boolean(env::prometheus_local, *local_value);
    }
    if (given) {
        // Two answers to where the endpoint listens: one is taken only when both say the same.
        if (const auto d = disagreement(*given, port_value, port, local_value, local); !d.empty()) {
            parse::fail(given_by, given->to_string(),
                        fmt::format("it disagrees with {}; set {} or NIXL's variables, "
                                    "not both, or make them agree",
                                    d, given_by));
        }
        s.address = *given;
        return s;
    }
    if (local) {
        s.address.host = *local ? std::string(host_port::default_host) : std::string("0.0.0.0");
    } else if (port) {
        // NIXL listens on every interface unless told otherwise; xtel opens nothing to the
        // network unasked, so the port alone keeps loopback, and that is said.
        detail::log(log_level::warning,
                    "{}='{}' without {}: listening on {}:{}, not on every interface as NIXL "
                    "would; set {}=n to listen on every interface",
                    env::prometheus_port, *port_value, env::prometheus_local,
                    host_port::default_host, *port, env::prometheus_local);
    }
    if (port) {
        s.address.port = *port;
    }
    return s;
}

}  // namespace xtel
