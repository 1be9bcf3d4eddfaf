#pragma once
// Helpers shared by the node file's writer and reader (private to src/).

#include <cstring>

#include "core/owned_file.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node::file::detail {

/// Reads the header at offset 0 with pread. True when all header_size bytes were read.
inline bool read_header(int fd, file_header& out) noexcept {
    return xtel::detail::pread_all(fd, &out, sizeof out, 0);
}

/// True when the header names this format: magic, version and header size as this build writes.
inline bool is_current_format(const file_header& h) noexcept {
    return std::memcmp(h.magic, magic, sizeof magic) == 0 && h.version == format_version &&
           h.header_size == header_size;
}

}  // namespace xtel::node::file::detail
