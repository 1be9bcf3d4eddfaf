#pragma once
// The pieces of RFC 9110 header syntax that the request parser and content negotiation read
// with (private to src/). Case-insensitive comparison is ASCII's (xtel/core/ascii.hpp).

#include <algorithm>
#include <string_view>

#include "xtel/core/ascii.hpp"

namespace xtel::http::detail {

using ascii::equals_ignoring_case;

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

}  // namespace xtel::http::detail
