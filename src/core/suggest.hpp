#pragma once
/// "Did you mean": the choice a mistyped keyword was meant to be, for the messages that refuse
/// a value of a variable (XTEL_LOG_LEVEL, NIXL_TELEMETRY_EXPORTER).

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace xtel::detail {

/// The choice nearest `value` ignoring case, when it is near enough to be a typo of it: at
/// most one edit for a value of up to four characters, two for a longer one (an edit inserts,
/// deletes or changes a character, or swaps two adjacent ones). The first of equally near ones.
std::optional<std::string_view> nearest(std::string_view value,
                                        std::span<const std::string_view> choices);

/// " (did you mean 'x'?)" for the nearest choice, or nothing.
std::string did_you_mean(std::string_view value, std::span<const std::string_view> choices);

/// True when `a` and `b` are the same ignoring ASCII case: the rule for every keyword xtel
/// defines (booleans, log levels, built-in exporter names); the comparison is
/// ascii::equals_ignoring_case, named here for what it decides.
bool same_keyword(std::string_view a, std::string_view b) noexcept;

}  // namespace xtel::detail
