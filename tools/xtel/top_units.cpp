// The units xtel top shows numbers in: bytes in powers of 1024, counts in powers of 1000,
// seconds from ns to s, each with three significant digits.

#include "top_view.hpp"

#include <fmt/format.h>

#include <cmath>

namespace xtel::top {

namespace {

/// `v` (at least 1) with three significant digits: two decimals under 10, one under 100.
std::string three_digits(double v) {
    if (v < 9.995) {
        return fmt::format("{:.2f}", v);
    }
    if (v < 99.95) {
        return fmt::format("{:.1f}", v);
    }
    return fmt::format("{:.0f}", v);
}

}  // namespace

std::string format_bytes(double bytes) {
    if (!(bytes >= 0)) {
        return "-";
    }
    if (bytes < 1024) {
        return fmt::format("{:.0f}B", std::floor(bytes));
    }
    constexpr std::string_view units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = bytes / 1024;
    std::size_t u = 0;
    // From 1023.5 of a unit (which would round to 1024) on, the next unit: 1.00MiB.
    while (v >= 1023.5 && u + 1 < std::size(units)) {
        v /= 1024;
        ++u;
    }
    return three_digits(v) + std::string(units[u]);
}

std::string format_count(double n) {
    if (!(n >= 0)) {
        return "-";
    }
    if (n < 10 && n != std::floor(n)) {
        return fmt::format("{:.1f}", n);
    }
    if (n < 9999.5) {
        return fmt::format("{:.0f}", n);
    }
    constexpr std::string_view units[] = {"k", "M", "G", "T", "P", "E"};
    double v = n / 1000;
    std::size_t u = 0;
    while (v >= 999.5 && u + 1 < std::size(units)) {
        v /= 1000;
        ++u;
    }
    return three_digits(v) + std::string(units[u]);
}

std::string format_seconds(double s) {
    if (!(s >= 0)) {
        return "-";
    }
    if (s < 999.5e-9) {
        return fmt::format("{:.0f}ns", s * 1e9);
    }
    if (s < 999.5e-6) {
        return three_digits(s * 1e6) + "us";
    }
    if (s < 999.5e-3) {
        return three_digits(s * 1e3) + "ms";
    }
    return three_digits(s) + "s";
}

}  // namespace xtel::top
