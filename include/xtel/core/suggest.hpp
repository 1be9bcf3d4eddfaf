#pragma once
/// "Did you mean": the choice a mistyped keyword was meant to be, for the messages that refuse
/// a variable's value (XTEL_LOG_LEVEL, NIXL_TELEMETRY_EXPORTER) or a program's option
/// (xtel-exporter's flags). Public, so that a tool's messages guess as the library's do.

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace xtel {

/// The choice nearest `value` ignoring case, when it is near enough to be a typo of it: at
/// most one edit for a value of up to four characters, two for a longer one (an edit inserts,
/// deletes or changes a character, or swaps two adjacent ones). The first of equally near ones.
std::optional<std::string_view> nearest(std::string_view value,
                                        std::span<const std::string_view> choices);

/// " (did you mean 'x'?)" for the nearest choice, or nothing.
std::string did_you_mean(std::string_view value, std::span<const std::string_view> choices);

}  // namespace xtel
