// host:port as the variables and flags that name an endpoint take it (xtel/core/host_port.hpp).
#include "xtel/core/host_port.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "xtel/core/parse.hpp"

namespace xtel {

namespace {

constexpr std::string_view address_accepted =
    "expected host:port or a bare port, where host is an IPv4 address, a host name, or an IPv6 "
    "address in brackets ([::1]:9464), and port is 0 to 65535 (0 picks a free port); a bare "
    "port listens on 127.0.0.1, and 0.0.0.0:port on every interface";

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
        parse::fail(var, value, address_accepted);
    }
    unsigned out = 0;
    std::from_chars(port.data(), port.data() + port.size(), out);
    if (out > 65535) {
        parse::fail(var, value, address_accepted);
    }
    return static_cast<std::uint16_t>(out);
}

}  // namespace

host_port host_port::parse(std::string_view var, std::string_view value) {
    host_port a;
    if (value.empty()) {
        parse::fail(var, value, address_accepted);
    }
    if (value.front() == '[') {
        const auto close = value.find(']');
        if (close == std::string_view::npos || close + 1 >= value.size() ||
            value[close + 1] != ':') {
            parse::fail(var, value, address_accepted);
        }
        const auto host = value.substr(1, close - 1);
        if (host.empty() || host.find(':') == std::string_view::npos ||
            !std::all_of(host.begin(), host.end(), is_ipv6_char)) {
            parse::fail(var, value, address_accepted);
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
        // Said once, with the value's own port: the general form would repeat it.
        const auto port = value.substr(colon + 1);
        parse::fail(var, value,
                    fmt::format("a host is needed before ':': '{0}' listens on 127.0.0.1, "
                                "'0.0.0.0:{0}' on every interface, '[::]:{0}' on every IPv6 one",
                                parse::escape_controls(port)));
    }
    if (host.size() > 253 || !std::all_of(host.begin(), host.end(), is_host_char) ||
        host.front() == '-' || host.front() == '.') {
        parse::fail(var, value, address_accepted);
    }
    a.host = std::string(host);
    a.port = parse_port(var, value, value.substr(colon + 1));
    return a;
}

std::string host_port::to_string() const {
    return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port)
                                               : fmt::format("[{}]:{}", host, port);
}

}  // namespace xtel
