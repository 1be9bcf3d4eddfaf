#pragma once
/// host:port, as the variables and flags that name an endpoint take it.

#include <cstdint>
#include <string>
#include <string_view>

namespace xtel {

/// An address to listen on or connect to: host and TCP port.
struct host_port {
    static constexpr std::string_view default_host = "127.0.0.1";
    static constexpr std::uint16_t default_port = 9464;

    /// An IPv4 address, a host name, or an IPv6 address without brackets ("::1").
    std::string host{default_host};
    /// 0 asks the system for a free port.
    std::uint16_t port = default_port;

    /// Accepts `host:port`, `[ipv6]:port` or a bare `port` (which listens on 127.0.0.1).
    /// Throws config_error naming `var`, quoting `value` and saying what is accepted.
    static host_port parse(std::string_view var, std::string_view value);

    /// "127.0.0.1:9464", "[::1]:9464".
    std::string to_string() const;

    friend bool operator==(const host_port&, const host_port&) = default;
};

}  // namespace xtel
