#pragma once
/// A kept value as the double a pushed sample carries (private to src/node/).

#include <charconv>
#include <cstdint>
#include <string>

#include "xtel/metrics/exposition.hpp"

namespace xtel::push {

/// v / 10^decimals as the double nearest the exact quotient, the value a scraper reads from the
/// text the exposition shows ("0.000450"), also past 2^53 where v itself is not a double.
inline double scaled(std::uint64_t v, std::uint8_t decimals) {
    if (decimals == 0) {
        return static_cast<double>(v);
    }
    std::string text;
    metrics::append_scaled(text, v, decimals);
    double out = 0;
    std::from_chars(text.data(), text.data() + text.size(), out);
    return out;
}

}  // namespace xtel::push
