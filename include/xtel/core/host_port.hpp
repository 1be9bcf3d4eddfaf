#pragma once
/// host:port, as the variables and flags that name an endpoint take it.

#include <cstdint>
#include <string>
#include <string_view>

namespace xtel {

/// An address to listen on or connect to: host and TCP port. Which port an endpoint uses when
/// none is configured is its own business (prometheus_settings::default_port, say).
struct host_port {
    /// The host a bare port gets: loopback, so that nothing is opened to the network unasked.
    static constexpr std::string_view default_host = "127.0.0.1";

    /// An IPv4 address, a host name, or an IPv6 address without brackets ("::1").
    std::string host{default_host};
    /// 0 asks the system for a free port.
    std::uint16_t port = 0;

    /// Accepts `host:port`, `[ipv6]:port` or a bare `port` (which listens on 127.0.0.1).
    /// Throws config_error naming `var`, quoting `value` and saying what is accepted.
    static host_port parse(std::string_view var, std::string_view value);

    /// "127.0.0.1:9464", "[::1]:9464".
    std::string to_string() const;

    friend bool operator==(const host_port&, const host_port&) = default;
};

}  // namespace xtel
