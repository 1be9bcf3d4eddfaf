#pragma once
/// The Prometheus and OpenMetrics rules a family must follow to be served: the metric store
/// checks them for producers and decode_snapshot for a node file, with one definition, so a
/// family the store made always decodes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xtel::metrics {

/// [a-zA-Z_]: what starts a label name.
constexpr bool is_name_letter(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/// [a-zA-Z0-9_]: what a label name goes on with, and all a unit holds.
constexpr bool is_name_char(char c) noexcept {
    return is_name_letter(c) || (c >= '0' && c <= '9');
}

/// A metric (family) name: [a-zA-Z_:][a-zA-Z0-9_:]*.
constexpr bool is_metric_name(std::string_view s) noexcept {
    return !s.empty() && (is_name_letter(s[0]) || s[0] == ':') &&
           std::all_of(s.begin(), s.end(), [](char c) { return is_name_char(c) || c == ':'; });
}

/// A label name a producer may use: [a-zA-Z_][a-zA-Z0-9_]*, not starting with `__` (reserved
/// for Prometheus' own labels, __name__ among them).
constexpr bool is_label_name(std::string_view s) noexcept {
    return !s.empty() && !s.starts_with("__") && is_name_letter(s[0]) &&
           std::all_of(s.begin(), s.end(), is_name_char);
}

/// An OpenMetrics unit: [a-zA-Z0-9_]*, empty for none.
constexpr bool is_unit(std::string_view s) noexcept {
    return std::all_of(s.begin(), s.end(), is_name_char);
}

/// Whether a non-empty `unit` ends a family's name as OpenMetrics requires: `_<unit>`, before
/// the `_total` of a counter. Prometheus refuses a whole scrape over a UNIT line that does not.
constexpr bool unit_ends_name(std::string_view name, std::string_view unit, bool counter) noexcept {
    if (counter && name.ends_with("_total")) {
        name.remove_suffix(std::string_view("_total").size());
    }
    return name.size() > unit.size() && name.ends_with(unit) &&
           name[name.size() - unit.size() - 1] == '_';
}

/// The length of the valid UTF-8 sequence `s` starts with (1 to 4), or 0 when its first byte
/// does not start one (a stray continuation byte, an overlong form, a surrogate, past
/// U+10FFFF, cut short). PRECONDITION: `s` is not empty. Readers show each such byte of a label
/// value or HELP text as U+FFFD, since Prometheus refuses a whole scrape over invalid UTF-8.
constexpr std::size_t utf8_sequence(std::string_view s) noexcept {
    const auto b0 = static_cast<unsigned char>(s[0]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b0 < 0x80) {
        return 1;
    } else if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        cp = b0 & 0x07;
    } else {
        return 0;
    }
    if (s.size() < n) {
        return 0;
    }
    for (std::size_t i = 1; i < n; ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if ((b & 0xC0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    const bool overlong = cp < min_for_length[n];
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    return overlong || surrogate || cp > 0x10FFFF ? 0 : n;
}

/// Whether every byte of `s` is part of a valid UTF-8 sequence (readers show it as it is).
constexpr bool is_utf8(std::string_view s) noexcept {
    while (!s.empty()) {
        // Most label values are ASCII: skipped a run at a time.
        const auto ascii = std::find_if(
            s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
        s.remove_prefix(static_cast<std::size_t>(ascii - s.begin()));
        if (s.empty()) {
            break;
        }
        const std::size_t n = utf8_sequence(s);
        if (n == 0) {
            return false;
        }
        s.remove_prefix(n);
    }
    return true;
}

/// `v` as readers show it: each byte that does not start a valid UTF-8 sequence as U+FFFD.
inline std::string shown_value(std::string_view v) {
    std::string out;
    while (!v.empty()) {
        const std::size_t n = utf8_sequence(v);
        out.append(n == 0 ? std::string_view("\xEF\xBF\xBD") : v.substr(0, n));
        v.remove_prefix(std::max<std::size_t>(n, 1));
    }
    return out;
}

/// A histogram bound as readers show it (`le`, remote write, OTLP): divided by 10^decimals.
/// Bounds must be strictly increasing also in this form, or two buckets would show as one.
constexpr double shown_bound(double bound, std::uint8_t decimals) noexcept {
    double scale = 1;
    for (std::uint8_t i = 0; i < decimals; ++i) {
        scale *= 10;
    }
    return bound / scale;
}

}  // namespace xtel::metrics
