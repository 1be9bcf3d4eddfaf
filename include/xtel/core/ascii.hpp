#pragma once
/// ASCII as protocols and file formats spell it: letter case (header names, tokens, keywords
/// are case-insensitive ASCII, whatever the locale) and hex digits (ids, escapes, percent
/// encoding). The one place these are written; std::tolower and std::isxdigit follow the C
/// locale and take an int, which is why they are not used for these.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace xtel::ascii {

/// `c` in lower case when it is an ASCII upper-case letter; any other byte unchanged.
constexpr char lower(char c) noexcept {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

/// `s` with its ASCII letters in lower case.
inline std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        c = lower(c);
    }
    return out;
}

/// True when `a` and `b` are the same but for ASCII case.
constexpr bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                              [](char x, char y) { return lower(x) == lower(y); });
}

/// The lower-case hex digits, by value.
inline constexpr std::string_view hex_digits = "0123456789abcdef";

/// The value of hex digit `c` in either case, or -1.
constexpr int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/// The value of lower-case hex digit `c`, or -1 (for 'A' to 'F' too): for formats that write
/// each byte one way only.
constexpr int lower_hex_value(char c) noexcept {
    return c >= 'A' && c <= 'F' ? -1 : hex_value(c);
}

/// Writes `bytes` as lower-case hex, two digits each, to `out` (2 * bytes.size() characters).
constexpr void write_hex(std::span<const std::uint8_t> bytes, char* out) noexcept {
    for (const std::uint8_t b : bytes) {
        *out++ = hex_digits[b >> 4];
        *out++ = hex_digits[b & 0xf];
    }
}

/// `bytes` as lower-case hex, two digits each.
inline std::string to_hex(std::span<const std::uint8_t> bytes) {
    std::string out(2 * bytes.size(), '0');
    write_hex(bytes, out.data());
    return out;
}

/// The same into a fixed array, for callers that must not allocate.
template <std::size_t N>
constexpr std::array<char, 2 * N> to_hex_array(const std::array<std::uint8_t, N>& bytes) noexcept {
    std::array<char, 2 * N> out{};
    write_hex(bytes, out.data());
    return out;
}

}  // namespace xtel::ascii
