#pragma once
// Helpers shared by the flight recorder's writer and reader (private to src/).

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

#include "xtel/flight_recorder.hpp"

namespace xtel::flight_recorder::detail {

inline std::string errno_text(int err) {
    return std::system_category().message(err);
}

/// Closes a file descriptor on scope exit unless released.
struct fd_guard {
    int fd = -1;
    fd_guard() = default;
    explicit fd_guard(int f) : fd(f) {}
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    ~fd_guard() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    int release() noexcept {
        const int f = fd;
        fd = -1;
        return f;
    }
};

/// Reads the header at offset 0 with pread (no mapping, so a file cut short under it reads short
/// instead of raising SIGBUS). True when all header_size bytes were read.
inline bool read_header(int fd, file_header& out) noexcept {
    std::size_t done = 0;
    auto* p = reinterpret_cast<char*>(&out);
    while (done < sizeof out) {
        const ssize_t n = ::pread(fd, p + done, sizeof out - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}

/// True when the header names this format: magic, version and layout as this build writes them.
inline bool is_current_format(const file_header& h) noexcept {
    return std::memcmp(h.magic, magic, sizeof magic) == 0 && h.version == format_version &&
           h.header_size == header_size && h.slot_size == slot_size &&
           h.event_size == sizeof(event) && h.capacity != 0;
}

}  // namespace xtel::flight_recorder::detail
