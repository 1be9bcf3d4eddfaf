#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/suggest.hpp"
#include "xtel/core/parse.hpp"

namespace xtel {

namespace {

constexpr std::string_view level_name(log_level l) {
    switch (l) {
        case log_level::error:
            return "error";
        case log_level::warning:
            return "warning";
        case log_level::info:
            return "info";
        case log_level::debug:
            return "debug";
    }
    return "?";
}

/// The name each stderr line starts with (set_log_program). Apart from the logger's state, so
/// that a name set before anything is logged is in the XTEL_LOG_LEVEL complaint that making
/// the state writes.
struct program_name {
    std::mutex mutex;
    std::string name = "xtel";
};

program_name& program() {
    static program_name p;
    return p;
}

/// One line, in one call, without allocating.
void write_stderr(log_level level, std::string_view message) noexcept {
    const std::string_view level_text = level_name(level);
    auto& p = program();
    const std::lock_guard lock(p.mutex);
    std::fprintf(stderr, "%s: %.*s: %.*s\n", p.name.c_str(), static_cast<int>(level_text.size()),
                 level_text.data(), static_cast<int>(message.size()), message.data());
}

constexpr std::string_view level_names[] = {"error", "warning", "info", "debug"};

/// XTEL_LOG_LEVEL's level, info when unset; a value that is none of the names is refused with
/// one line (written once the logger exists) and info is kept, so that a typo costs no message.
log_level initial_level(std::string& complaint) {
    const char* v = std::getenv("XTEL_LOG_LEVEL");
    if (v == nullptr) {
        return log_level::info;
    }
    const std::string_view s(v);
    for (std::size_t i = 0; i < std::size(level_names); ++i) {
        if (detail::same_keyword(s, level_names[i])) {
            return static_cast<log_level>(i);
        }
    }
    complaint = fmt::format(
        "XTEL_LOG_LEVEL='{}' is invalid{}: expected error, warning, info or debug (in any case); "
        "logging at info",
        parse::escape_controls(s.substr(0, 64)), did_you_mean(s, level_names));
    return log_level::info;
}

struct logger_state {
    logger_state() {
        std::string complaint;
        level.store(static_cast<int>(initial_level(complaint)), std::memory_order_relaxed);
        if (!complaint.empty()) {
            write_stderr(log_level::warning, complaint);
        }
    }

    std::mutex mutex;
    log_sink sink;
    std::atomic<int> level{static_cast<int>(log_level::info)};
};

logger_state& state() {
    static logger_state s;
    return s;
}

}  // namespace

void set_log_sink(log_sink sink) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    s.sink = std::move(sink);
}

void set_log_program(std::string_view name) {
    auto& p = program();
    const std::lock_guard lock(p.mutex);
    p.name = name;
}

void set_log_level(log_level level) {
    state().level.store(static_cast<int>(level));
}

bool log_enabled(log_level level) noexcept {
    return static_cast<int>(level) <= state().level.load(std::memory_order_relaxed);
}

void log(log_level level, std::string_view message) noexcept {
    if (!log_enabled(level)) {
        return;
    }
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    if (s.sink) {
        try {
            s.sink(level, message);
            return;
        } catch (...) {
            // A sink that throws loses nothing: the message goes to stderr, as without a sink.
        }
    }
    write_stderr(level, message);
}

void detail::log_unformatted(log_level level, std::string_view format) noexcept {
    log(level, format);
}

}  // namespace xtel
