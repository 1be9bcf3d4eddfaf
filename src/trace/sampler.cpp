#include "xtel/trace/sampler.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>

#include "xtel/core/parse.hpp"

namespace xtel::trace {

namespace {

constexpr std::uint64_t two_to_56 = std::uint64_t{1} << 56;
constexpr std::uint64_t micro = 1'000'000;

/// A decimal fraction from 0 to 1: digits with at most one '.', no sign, exponent or spaces.
double fraction(std::string_view var, std::string_view value) {
    constexpr std::string_view accepted =
        "expected a fraction from 0 to 1 in decimal digits (0.01: one trace in a hundred)";
    bool digit = false;
    int dots = 0;
    for (const char c : value) {
        if (c >= '0' && c <= '9') {
            digit = true;
        } else if (c == '.') {
            ++dots;
        } else {
            parse::fail(var, value, accepted);
        }
    }
    if (!digit || dots > 1) {
        parse::fail(var, value, accepted);
    }
    // from_chars does not take a leading '.'; "0" before it reads the same number. Appended,
    // not `"0" + std::string(value)`: g++ 12 inlines that operator+ at -O3 into a memcpy it
    // warns may overlap (-Wrestrict), a false positive on every Release build.
    std::string text(value.front() == '.' ? "0" : "");
    text += value;
    double v = 0;
    const auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
    if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0 && v <= 1)) {
        parse::fail(var, value, accepted);
    }
    return v;
}

}  // namespace

sampler_settings sampler_settings::from_env(const env_lookup& lookup) {
    sampler_settings s;
    if (const auto v = lookup(env::trace_slow_us)) {
        s.slow_us = parse::unsigned_integer(env::trace_slow_us, *v, 0, max_slow_us);
    }
    if (const auto v = lookup(env::trace_sample)) {
        s.sample = fraction(env::trace_sample, *v);
    }
    if (const auto v = lookup(env::trace_budget)) {
        s.budget = parse::unsigned_integer(env::trace_budget, *v, 0, max_budget);
    }
    return s;
}

std::uint64_t sample_threshold(double fraction) noexcept {
    if (!(fraction > 0)) {
        return two_to_56;
    }
    if (fraction >= 1) {
        return 0;
    }
    const auto kept = static_cast<std::uint64_t>(std::llround(std::ldexp(fraction, 56)));
    return two_to_56 - std::min(kept, two_to_56);
}

sampler::sampler(const sampler_settings& settings, std::uint64_t now_us) noexcept
    : settings_(settings),
      threshold_(sample_threshold(settings.sample)),
      tokens_(settings.budget * micro),
      last_us_(now_us) {}

bool sampler::take_token(std::uint64_t now_us) noexcept {
    const std::uint64_t full = settings_.budget * micro;
    if (now_us > last_us_) {
        // A second refills the bucket whatever is in it; capping the gap keeps the product
        // from overflowing after a long quiet time.
        const std::uint64_t gap = std::min(now_us - last_us_, micro);
        tokens_ = std::min(full, tokens_ + gap * settings_.budget);
        last_us_ = now_us;
    }
    if (tokens_ < micro) {
        return false;
    }
    tokens_ -= micro;
    return true;
}

}  // namespace xtel::trace
