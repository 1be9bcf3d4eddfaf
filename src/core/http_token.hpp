#pragma once
// The pieces of RFC 9110 header syntax that both the HTTP request parser (http) and content
// negotiation (metrics) read with, kept here because metrics must not include http (private to
// src/).

#include <algorithm>
#include <string_view>

namespace xtel::detail {

/// ASCII lower case; other bytes unchanged (header names and tokens are case-insensitive ASCII).
constexpr char lower_ascii(char c) noexcept {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

/// True when `a` and `b` are the same but for ASCII case.
constexpr bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return lower_ascii(x) == lower_ascii(y);
           });
}

/// `s` without the optional white space (spaces and tabs) at either end.
constexpr std::string_view trim_ows(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

/// A token character (RFC 9110 tchar): methods, header names, media types, parameters.
constexpr bool is_tchar(char c) noexcept {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return true;
    }
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

/// A token: one or more tchar.
constexpr bool is_token(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

}  // namespace xtel::detail
