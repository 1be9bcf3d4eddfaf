// The Prometheus exporter's settings: NIXL_TELEMETRY_PROMETHEUS_* and the endpoint address.
#include "xtel/exporters/prometheus.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <limits.h>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "xtel/error.hpp"

namespace xtel {

namespace {

constexpr std::string_view address_accepted =
    "expected host:port or a bare port, where host is an IPv4 address, a host name, or an IPv6 "
    "address in brackets ([::1]:9464), and port is 0 to 65535 (0 picks a free port); a bare "
    "port listens on 127.0.0.1, and 0.0.0.0:port on every interface";

[[noreturn]] void fail(std::string_view var, std::string_view value, std::string_view accepted) {
    throw config_error(fmt::format("{}='{}' is invalid: {}", var, value, accepted));
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool is_host_char(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-';
}

bool is_ipv6_char(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

std::uint16_t parse_port(std::string_view var, std::string_view value, std::string_view port) {
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit)) {
        fail(var, value, address_accepted);
    }
    unsigned out = 0;
    std::from_chars(port.data(), port.data() + port.size(), out);
    if (out > 65535) {
        fail(var, value, address_accepted);
    }
    return static_cast<std::uint16_t>(out);
}

std::string this_host_name() {
    char buf[HOST_NAME_MAX + 1] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') {
        return "unknown";
    }
    return buf;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

}  // namespace

host_port host_port::parse(std::string_view var, std::string_view value) {
    host_port a;
    if (value.empty()) {
        fail(var, value, address_accepted);
    }
    if (value.front() == '[') {
        const auto close = value.find(']');
        if (close == std::string_view::npos || close + 1 >= value.size() ||
            value[close + 1] != ':') {
            fail(var, value, address_accepted);
        }
        const auto host = value.substr(1, close - 1);
        if (host.empty() || host.find(':') == std::string_view::npos ||
            !std::all_of(host.begin(), host.end(), is_ipv6_char)) {
            fail(var, value, address_accepted);
        }
        a.host = std::string(host);
        a.port = parse_port(var, value, value.substr(close + 2));
        return a;
    }
    const auto colon = value.rfind(':');
    if (colon == std::string_view::npos) {
        a.port = parse_port(var, value, value);
        return a;
    }
    const auto host = value.substr(0, colon);
    if (host.empty()) {
        fail(var, value,
             fmt::format("a host is needed before ':' (a bare port listens on 127.0.0.1, "
                         "0.0.0.0:port on every interface); {}",
                         address_accepted));
    }
    if (host.size() > 253 || !std::all_of(host.begin(), host.end(), is_host_char) ||
        host.front() == '-' || host.front() == '.') {
        fail(var, value, address_accepted);
    }
    a.host = std::string(host);
    a.port = parse_port(var, value, value.substr(colon + 1));
    return a;
}

std::string host_port::to_string() const {
    return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port)
                                               : fmt::format("[{}]:{}", host, port);
}

std::vector<double> prometheus_settings::default_buckets() {
    return {1,    2,    5,     10,    20,    50,     100,    200,    500,    1000,
            2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000};
}

std::vector<double> prometheus_settings::parse_buckets(std::string_view var,
                                                       std::string_view value) {
    const auto accepted = fmt::format(
        "expected 1 to {} comma-separated bucket upper bounds in microseconds, each a finite "
        "number not below 0 and greater than the one before (for example 10,100,1000); +Inf "
        "is always added",
        max_buckets);
    std::vector<double> out;
    std::string_view rest = value;
    while (true) {
        const auto comma = rest.find(',');
        const auto item = trim(rest.substr(0, comma));
        double b = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), b);
        if (item.empty() || ec != std::errc{} || ptr != item.data() + item.size() ||
            !std::isfinite(b) || b < 0 || (!out.empty() && b <= out.back()) ||
            out.size() == max_buckets) {
            fail(var, value, accepted);
        }
        out.push_back(b);
        if (comma == std::string_view::npos) {
            return out;
        }
        rest.remove_prefix(comma + 1);
    }
}

std::vector<std::string> prometheus_settings::default_builders() {
    return {std::begin(known_builders), std::end(known_builders)};
}

std::vector<std::string> prometheus_settings::parse_builders(std::string_view var,
                                                             std::string_view value) {
    const auto accepted = fmt::format(
        "expected builder names separated by commas, each at most once, from {} (for example "
        "legacy,comprehensive), or none for no transfer series",
        fmt::join(known_builders, ", "));
    if (trim(value) == "none") {
        return {};
    }
    std::vector<std::string> out;
    std::string_view rest = value;
    while (true) {
        const auto comma = rest.find(',');
        const auto item = trim(rest.substr(0, comma));
        const bool known = std::find(std::begin(known_builders), std::end(known_builders), item) !=
                           std::end(known_builders);
        if (!known || std::find(out.begin(), out.end(), item) != out.end()) {
            fail(var, value, accepted);
        }
        out.emplace_back(item);
        if (comma == std::string_view::npos) {
            return out;
        }
        rest.remove_prefix(comma + 1);
    }
}

prometheus_settings prometheus_settings::from_env(const config& cfg, const env_lookup& lookup) {
    prometheus_settings s;
    s.hostname = this_host_name();
    const bool buffer_named =
        std::find(cfg.exporters.begin(), cfg.exporters.end(), "buffer") != cfg.exporters.end();
    if (const auto v = lookup(env::prometheus_address)) {
        s.address = host_port::parse(env::prometheus_address, *v);
    } else if (!cfg.output_path.empty() && !buffer_named) {
        s.address = host_port::parse(env::output_path, cfg.output_path);
    }
    if (const auto v = lookup(env::prometheus_buckets)) {
        s.buckets = parse_buckets(env::prometheus_buckets, *v);
    }
    if (const auto v = lookup(env::prometheus_builders)) {
        s.builders = parse_builders(env::prometheus_builders, *v);
    }
    if (const auto v = lookup(env::prometheus_max_series)) {
        s.max_series = parse::unsigned_integer(env::prometheus_max_series, *v, 1, max_max_series);
    }
    return s;
}

}  // namespace xtel
