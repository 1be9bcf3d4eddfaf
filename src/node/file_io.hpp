#pragma once
// The node file as an owned file, for its writer and its reader (private to src/).

#include <cstddef>

#include "core/owned_file.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node::file::detail {

static_assert(static_cast<std::uint32_t>(writer_state::open) == xtel::detail::state_open &&
              static_cast<std::uint32_t>(writer_state::closed) == xtel::detail::state_closed);

inline constexpr xtel::detail::owned_file_kind file_kind{
    .noun = "node file",
    .format_name = "node file",
    .stopped =
        "publishing stopped: the agent runs on, its metrics are no longer published to "
        "this file",
    .magic = {magic, sizeof magic},
    .version = format_version,
    .header_size = header_size,
    .created_us_at = offsetof(file_header, created_us),
    .writer_pid_at = offsetof(file_header, writer_pid),
    .state_at = offsetof(file_header, state),
};

}  // namespace xtel::node::file::detail
