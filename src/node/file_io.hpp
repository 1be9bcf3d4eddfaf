#pragma once
// The node file as an owned file, for its writer and its reader (private to src/).

#include "core/owned_file.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node::file::detail {

static_assert(static_cast<std::uint32_t>(writer_state::open) == xtel::detail::state_open &&
              static_cast<std::uint32_t>(writer_state::closed) == xtel::detail::state_closed);

inline constexpr auto file_kind = xtel::detail::owned_file_kind_of<file_header>(
    "node file",
    "node file",
    "publishing stopped: the agent runs on, its metrics are no longer published to this file",
    {magic, sizeof magic},
    format_version);

}  // namespace xtel::node::file::detail
