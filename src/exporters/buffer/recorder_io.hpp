#pragma once
// Helpers shared by the flight recorder's writer and reader (private to src/).

#include <cstring>

#include "core/owned_file.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace xtel::flight_recorder::detail {

using xtel::detail::errno_text;
using xtel::detail::fd_guard;

/// Reads the header at offset 0 with pread (no mapping, so a file cut short under it reads short
/// instead of raising SIGBUS). True when all header_size bytes were read.
inline bool read_header(int fd, file_header& out) noexcept {
    return xtel::detail::pread_all(fd, &out, sizeof out, 0);
}

/// True when the header names this format: magic, version and layout as this build writes them.
inline bool is_current_format(const file_header& h) noexcept {
    return std::memcmp(h.magic, magic, sizeof magic) == 0 && h.version == format_version &&
           h.header_size == header_size && h.slot_size == slot_size &&
           h.event_size == sizeof(event) && h.capacity != 0;
}

}  // namespace xtel::flight_recorder::detail
