#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <thread>

#include "xtel/core/clock.hpp"
#include "xtel/core/tsc_clock.hpp"

namespace tsc_clock_test {

TEST_CASE("the transfer clock tells wall-clock time to within a millisecond") {
    xtel::detail::tsc_clock c;
    for (int i = 0; i < 3; ++i) {
        const std::uint64_t before = xtel::clock::now_us();
        const std::uint64_t t = c.wall_us(c.now());
        const std::uint64_t after = xtel::clock::now_us();
        CHECK(t + 1000 >= before);
        CHECK(t <= after + 1000);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

TEST_CASE("the transfer clock measures a 20 ms pause as 20 ms") {
    xtel::detail::tsc_clock c;
    const std::uint64_t start = c.now();
    const auto wall_start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::uint64_t end = c.now();
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now() - wall_start)
                             .count();
    const auto measured = static_cast<std::int64_t>(c.micros(start, end));
    CHECK(measured >= 20'000);
    // Within 2% (and the time between the two readings of each pair).
    CHECK(std::abs(measured - elapsed) <= elapsed / 50 + 100);
    CHECK(c.micros(end, start) == 0);
}

TEST_CASE("the transfer clock keeps to wall-clock time past its once-a-second re-anchoring") {
    if (!xtel::detail::calibrate_tsc().usable) {
        WARN("no invariant TSC: the clock reads clock_gettime directly");
        return;
    }
    xtel::detail::tsc_clock c;
    const std::uint64_t early = c.now();
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    const std::uint64_t now_wall = xtel::clock::now_us();
    const std::uint64_t t = c.wall_us(c.now());
    CHECK(t + 1000 >= now_wall);
    CHECK(t <= now_wall + 1000);
    // A reading from before the new anchor still converts consistently.
    CHECK(c.wall_us(early) + 1'050'000 <= t);
    CHECK(c.wall_us(early) + 1'300'000 >= t);
}

}  // namespace tsc_clock_test
