#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace xtel {

namespace {

log_level initial_level() {
    const char* v = std::getenv("XTEL_LOG_LEVEL");
    if (v == nullptr) {
        return log_level::info;
    }
    const std::string_view s(v);
    if (s == "error")
        return log_level::error;
    if (s == "warning")
        return log_level::warning;
    if (s == "debug")
        return log_level::debug;
    return log_level::info;
}

struct logger_state {
    std::mutex mutex;
    log_sink sink;
    std::atomic<int> level{static_cast<int>(initial_level())};
};

logger_state& state() {
    static logger_state s;
    return s;
}

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

/// One line, in one call, without allocating.
void write_stderr(log_level level, std::string_view message) noexcept {
    const std::string_view name = level_name(level);
    std::fprintf(stderr, "xtel: %.*s: %.*s\n", static_cast<int>(name.size()), name.data(),
                 static_cast<int>(message.size()), message.data());
}

}  // namespace

void set_log_sink(log_sink sink) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    s.sink = std::move(sink);
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
