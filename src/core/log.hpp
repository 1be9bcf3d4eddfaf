#pragma once
/// The library's logging call: a format string checked at compile time, formatted only when
/// the level passes, and never throwing, so no caller wraps it in a try block.

#include <fmt/format.h>

#include <utility>

#include "xtel/core/log.hpp"

namespace xtel::detail {

/// Writes the format string itself when formatting fails (no memory): the message is shorter,
/// not lost.
void log_unformatted(log_level level, std::string_view format) noexcept;

template <class... Args>
void log(log_level level, fmt::format_string<Args...> format, Args&&... args) noexcept {
    if (!log_enabled(level)) {
        return;
    }
    try {
        xtel::log(level, fmt::format(format, std::forward<Args>(args)...));
    } catch (...) {
        const fmt::string_view text = format;
        log_unformatted(level, std::string_view(text.data(), text.size()));
    }
}

}  // namespace xtel::detail
