#pragma once
// Helpers shared by the flight recorder's writer and reader (private to src/).

#include <unistd.h>

#include <atomic>
#include <cstdint>
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

}  // namespace xtel::flight_recorder::detail
