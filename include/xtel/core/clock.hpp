#pragma once
/// Wall-clock timestamps in microseconds since the Unix epoch.

#include <time.h>

#include <cstdint>

namespace xtel::clock {

/// Microseconds since the epoch (CLOCK_REALTIME through the vDSO, no system call).
/// Callers that already hold a timestamp for a transfer pass it instead of reading again.
inline std::uint64_t now_us() noexcept {
    timespec ts;
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec) / 1'000u;
}

/// Monotonic microseconds, for durations.
inline std::uint64_t monotonic_us() noexcept {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec) / 1'000u;
}

}  // namespace xtel::clock
