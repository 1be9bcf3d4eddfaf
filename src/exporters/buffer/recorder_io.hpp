#pragma once
// The flight recorder as an owned file, for its writer and its reader (private to src/).

#include <cstddef>
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

inline constexpr xtel::detail::owned_file_kind file_kind{
    .noun = "flight recorder",
    .format_name = "telemetry buffer",
    .stopped = "recording stopped: transfers go on, their events are counted as lost",
    .magic = {magic, sizeof magic},
    .version = format_version,
    .header_size = header_size,
    .created_us_at = offsetof(file_header, created_us),
    .writer_pid_at = offsetof(file_header, writer_pid),
    .state_at = offsetof(file_header, state),
    .layout_current = layout_current,
};

}  // namespace xtel::flight_recorder::detail
