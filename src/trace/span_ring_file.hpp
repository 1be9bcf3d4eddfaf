#pragma once
// The span ring as an owned file, for its writer and its reader (private to src/).

#include "core/owned_file.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::trace::span_ring::detail {

static_assert(static_cast<std::uint32_t>(writer_state::open) == xtel::detail::state_open &&
              static_cast<std::uint32_t>(writer_state::closed) == xtel::detail::state_closed);

inline constexpr auto file_kind = xtel::detail::owned_file_kind_of<file_header>(
    "span ring",
    "span ring",
    "tracing stopped: the agent runs on, its spans are no longer written to this file",
    {magic, sizeof magic},
    format_version);

/// Where slot `index` starts.
constexpr std::uint64_t slot_offset(std::uint64_t index) noexcept {
    return header_size + index * sizeof(slot);
}

}  // namespace xtel::trace::span_ring::detail
