#pragma once
/// Every event name xtel records, in one place. docs/events.md lists each event with its
/// category, type, unit and when it is emitted.

#include <array>
#include <cstddef>
#include <string_view>

#include "xtel/core/event.hpp"
#include "xtel/core/status.hpp"

namespace xtel::names {

// TRANSFER, MEMORY and PERFORMANCE: the NIXL names.
inline constexpr event_name agent_memory_registered{"agent_memory_registered"};
inline constexpr event_name agent_memory_deregistered{"agent_memory_deregistered"};
inline constexpr event_name agent_tx_bytes{"agent_tx_bytes"};
inline constexpr event_name agent_rx_bytes{"agent_rx_bytes"};
inline constexpr event_name agent_tx_requests_num{"agent_tx_requests_num"};
inline constexpr event_name agent_rx_requests_num{"agent_rx_requests_num"};
inline constexpr event_name agent_xfer_time{"agent_xfer_time"};
inline constexpr event_name agent_xfer_post_time{"agent_xfer_post_time"};
/// Events the pipeline could not stage because a per-thread staging ring was full (a counter).
inline constexpr event_name telemetry_events_dropped{"telemetry_events_dropped"};
/// Batches an exporter failed to take (a counter, one per failing exporter call).
inline constexpr event_name telemetry_export_errors{"telemetry_export_errors"};

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
/// Prefix of the counters of NIXL's events that xtel's NIXL plug-in has no xtel name for, by
/// NIXL's name of their kind ("nixl_unmapped_not_posted", ..., "nixl_unmapped_undefined" for a
/// type NIXL does not define): the plug-in's losses, served where an operator looks.
inline constexpr std::string_view nixl_unmapped_prefix = "nixl_unmapped_";

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
