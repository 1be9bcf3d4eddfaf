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

/// Monotonic nanoseconds, for durations: the clock Python's time.perf_counter_ns() reads on
/// Linux, so that a duration may start in Python and end here.
inline std::uint64_t monotonic_ns() noexcept {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

/// Monotonic microseconds, for durations.
inline std::uint64_t monotonic_us() noexcept {
    return monotonic_ns() / 1'000u;
}

}  // namespace xtel::clock
