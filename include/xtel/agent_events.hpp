#pragma once
/// The agent's own event names, besides the transfer and memory names in event.hpp.
/// docs/events.md lists every event with its category, type, unit and when it is emitted.

#include <array>
#include <string_view>

#include "xtel/event.hpp"
#include "xtel/status.hpp"

namespace xtel::names {

// SYSTEM
inline constexpr event_name agent_start{"agent_start"};
inline constexpr event_name agent_stop{"agent_stop"};

// CONNECTION
inline constexpr event_name agent_connect{"agent_connect"};
inline constexpr event_name agent_disconnect{"agent_disconnect"};
inline constexpr event_name agent_connections{"agent_connections"};

// BACKEND
inline constexpr event_name ucx_backend_init{"ucx_backend_init"};
inline constexpr event_name ucx_version{"ucx_version"};
inline constexpr event_name ucx_endpoint_error{"ucx_endpoint_error"};
/// Prefix of the per-transport lane gauges ("ucx_tl_sysv", "ucx_tl_tcp", ...).
inline constexpr std::string_view ucx_transport_prefix = "ucx_tl_";

// ERROR: one counter per error kind, "agent_error_" + the status code's name.
inline constexpr std::array<event_name, status_code_count> agent_errors = {
    event_name{"agent_error_ok"},           // never recorded
    event_name{"agent_error_in_progress"},  // never recorded
    event_name{"agent_error_invalid_argument"},
    event_name{"agent_error_not_found"},
    event_name{"agent_error_busy"},
    event_name{"agent_error_not_supported"},
    event_name{"agent_error_bad_metadata"},
    event_name{"agent_error_remote_disconnected"},
    event_name{"agent_error_timed_out"},
    event_name{"agent_error_backend_error"},
};

/// The ERROR event of an error kind.
constexpr const event_name& agent_error(status_code c) noexcept {
    const auto i = static_cast<std::size_t>(c);
    return agent_errors[i < status_code_count ? i : status_code_count - 1];
}

}  // namespace xtel::names
