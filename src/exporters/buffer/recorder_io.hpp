#pragma once
// The flight recorder as an owned file, for its writer and its reader (private to src/).

#include <cstring>

#include "core/owned_file.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace xtel::flight_recorder::detail {

static_assert(static_cast<std::uint32_t>(writer_state::open) == xtel::detail::state_open &&
              static_cast<std::uint32_t>(writer_state::closed) == xtel::detail::state_closed);

/// The rest of the layout this build writes, past magic, version and header size.
inline bool layout_current(const void* header) noexcept {
    file_header h;
    std::memcpy(&h, header, sizeof h);
    return h.slot_size == slot_size && h.event_size == sizeof(event) && h.capacity != 0;
}

inline constexpr auto file_kind = xtel::detail::owned_file_kind_of<file_header>(
    "flight recorder",
    "telemetry buffer",
    "recording stopped: transfers go on, their events are counted as lost",
    {magic, sizeof magic},
    format_version,
    layout_current);

}  // namespace xtel::flight_recorder::detail
