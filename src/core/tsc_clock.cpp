#include "xtel/core/tsc_clock.hpp"

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace xtel::detail {

namespace {

std::uint64_t nanos(clockid_t id) noexcept {
    timespec ts;
    ::clock_gettime(id, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

#if defined(__x86_64__)
struct pairing {
    std::uint64_t ticks;
    std::uint64_t ns;
};

/// A TSC reading and a clock reading taken as close together as five tries allow.
pairing pair_with(clockid_t id) noexcept {
    pairing best{0, 0};
    std::uint64_t best_gap = ~std::uint64_t{0};
    for (int i = 0; i < 5; ++i) {
        const std::uint64_t before = __rdtsc();
        const std::uint64_t ns = nanos(id);
        const std::uint64_t after = __rdtsc();
        if (after - before < best_gap) {
            best_gap = after - before;
            best = {before + (after - before) / 2, ns};
        }
    }
    return best;
}

tsc_calibration measure() noexcept {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // Invariant TSC (CPUID 8000_0007h, EDX bit 8): constant rate, in step across cores.
    if (__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) == 0 || (edx & (1u << 8)) == 0) {
        return {};
    }
    const pairing start = pair_with(CLOCK_MONOTONIC_RAW);
    while (nanos(CLOCK_MONOTONIC_RAW) - start.ns < 5'000'000) {
    }
    const pairing end = pair_with(CLOCK_MONOTONIC_RAW);
    const double hz =
        static_cast<double>(end.ticks - start.ticks) * 1e9 / static_cast<double>(end.ns - start.ns);
    if (!(hz > 1e8 && hz < 1e11)) {
        return {};
    }
    return {true, static_cast<std::uint64_t>(hz)};
}
#else
tsc_calibration measure() noexcept {
    return {};
}
#endif

}  // namespace

const tsc_calibration& calibrate_tsc() {
    static const tsc_calibration c = measure();
    return c;
}

tsc_clock::tsc_clock() {
    const tsc_calibration& c = calibrate_tsc();
    tsc_ = c.usable;
    if (tsc_) {
        mult_ = static_cast<std::uint64_t>((static_cast<uint128>(1'000'000) << 32) /
                                           c.ticks_per_second);
        resync_ticks_ = c.ticks_per_second;
        reanchor();
    }
}

void tsc_clock::reanchor() noexcept {
#if defined(__x86_64__)
    const pairing p = pair_with(CLOCK_REALTIME);
    anchor_ticks_ = p.ticks;
    anchor_us_ = p.ns / 1000;
#endif
}

}  // namespace xtel::detail
