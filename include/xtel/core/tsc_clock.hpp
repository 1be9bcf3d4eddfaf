#pragma once
/// The clock an agent stamps transfers with: one plain rdtsc per reading.
///
/// clock_gettime orders its own TSC read (lfence) and costs about 24 ns here; a plain rdtsc
/// overlaps with the transfer around it, and the two readings per transfer cost about 4 ns
/// (bench/agent_bench.cpp). Readings become microseconds with one multiply. Wall-clock time is
/// re-anchored to CLOCK_REALTIME once a second, so it strays from it by no more than the TSC
/// calibration error over a second (a few microseconds).
///
/// PRECONDITION: one thread at a time uses an instance (the agent's contract). Without an
/// invariant TSC (or off x86-64) readings are clock::now_us() values and conversions are
/// identities.

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "xtel/core/clock.hpp"

namespace xtel::detail {

__extension__ using uint128 = unsigned __int128;  // for one widening multiply

struct tsc_calibration {
    bool usable = false;
    std::uint64_t ticks_per_second = 0;
};

/// Measured once per process, on first use (about 5 ms), against CLOCK_MONOTONIC_RAW.
const tsc_calibration& calibrate_tsc();

class tsc_clock {
  public:
    tsc_clock();

    /// A reading: TSC ticks, or microseconds where there is no usable TSC.
    std::uint64_t now() noexcept {
#if defined(__x86_64__)
        if (tsc_) [[likely]] {
            return __rdtsc();
        }
#endif
        return clock::now_us();
    }

    /// Microseconds from one reading to a later one (0 if the later is not later).
    std::uint64_t micros(std::uint64_t earlier, std::uint64_t later) const noexcept {
        return later > earlier ? scale(later - earlier) : 0;
    }

    /// Microseconds since the Unix epoch at a reading.
    std::uint64_t wall_us(std::uint64_t reading) noexcept {
        if (!tsc_) {
            return reading;
        }
        if (reading > anchor_ticks_ && reading - anchor_ticks_ > resync_ticks_) [[unlikely]] {
            reanchor();
        }
        return reading >= anchor_ticks_ ? anchor_us_ + scale(reading - anchor_ticks_)
                                        : anchor_us_ - scale(anchor_ticks_ - reading);
    }

  private:
    std::uint64_t scale(std::uint64_t ticks) const noexcept {
        if (!tsc_) {
            return ticks;
        }
        return static_cast<std::uint64_t>((static_cast<uint128>(ticks) * mult_) >> 32);
    }

    /// Out of line: pairs a TSC reading with CLOCK_REALTIME.
    void reanchor() noexcept;

    bool tsc_ = false;
    std::uint64_t mult_ = 0;  ///< microseconds per tick, times 2^32
    std::uint64_t resync_ticks_ = 0;
    std::uint64_t anchor_ticks_ = 0;
    std::uint64_t anchor_us_ = 0;
};

}  // namespace xtel::detail
