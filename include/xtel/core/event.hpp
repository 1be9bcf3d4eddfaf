#pragma once
/// The telemetry event: fixed size, trivially copyable, at most one cache line.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace xtel {

/// What an event is about. The numeric values are part of the flight recorder format.
enum class category : std::uint8_t {
    memory = 0,
    transfer = 1,
    connection = 2,
    backend = 3,
    error = 4,
    performance = 5,
    system = 6,
    custom = 7,
};

inline constexpr std::size_t category_count = 8;

/// Upper-case name as the NIXL documents print it ("TRANSFER"); "UNKNOWN" out of range.
constexpr std::string_view to_string(category c) noexcept {
    constexpr std::string_view names[category_count] = {
        "MEMORY", "TRANSFER", "CONNECTION", "BACKEND", "ERROR", "PERFORMANCE", "SYSTEM", "CUSTOM"};
    const auto i = static_cast<std::size_t>(c);
    return i < category_count ? names[i] : std::string_view{"UNKNOWN"};
}

/// How a value is meant: a counter event carries an increment, a gauge event the current
/// level, a plain event a measurement. Exporters that aggregate (Prometheus) read it.
enum class value_kind : std::uint8_t {
    counter = 0,
    gauge = 1,
    sample = 2,
};

/// Longest event name, in bytes; names are NUL-padded to this plus one.
inline constexpr std::size_t max_name_length = 37;

/// An event name stored NUL-padded at a fixed width, so the hot path copies it with a few
/// fixed-size moves. Longer names are truncated.
class event_name {
  public:
    constexpr event_name() noexcept = default;
    constexpr event_name(std::string_view s) noexcept {  // NOLINT: implicit on purpose
        const auto n = std::min(s.size(), max_name_length);
        for (std::size_t i = 0; i < n; ++i) {
            chars_[i] = s[i];
        }
    }
    constexpr event_name(const char* s) noexcept : event_name(std::string_view{s}) {}

    constexpr std::string_view view() const noexcept {
        std::size_t n = 0;
        while (n < max_name_length && chars_[n] != '\0') {
            ++n;
        }
        return {chars_, n};
    }
    constexpr const char* c_str() const noexcept { return chars_; }
    friend constexpr bool operator==(const event_name& a, const event_name& b) noexcept {
        return a.view() == b.view();
    }

  private:
    char chars_[max_name_length + 1] = {};
};

/// One telemetry event. 56 bytes, so that the flight recorder slot (8-byte sequence + event)
/// is exactly one 64-byte cache line.
struct event {
    std::uint64_t timestamp_us = 0;  ///< microseconds since the Unix epoch
    std::uint64_t value = 0;
    category cat = category::custom;
    value_kind kind = value_kind::sample;
    event_name name;

    std::string_view name_view() const noexcept { return name.view(); }
};

static_assert(sizeof(event_name) == 38);
static_assert(sizeof(event) == 56);
static_assert(std::is_trivially_copyable_v<event>);
static_assert(std::is_standard_layout_v<event>);

}  // namespace xtel
