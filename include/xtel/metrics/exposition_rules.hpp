#pragma once
/// The Prometheus and OpenMetrics rules a family must follow to be served: the metric store
/// checks them for producers and decode_snapshot for a node file, with one definition, so a
/// family the store made always decodes.

#include <algorithm>
#include <cstdint>
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
