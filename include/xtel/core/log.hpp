#pragma once
/// xtel's diagnostics: a replaceable sink, stderr by default, and a level. Never called on the
/// record path. The library formats its own messages with a level-checked call kept private
/// to src/ (src/core/log.hpp), so this header needs no formatting library.

#include <functional>
#include <string_view>

namespace xtel {

enum class log_level { error = 0, warning = 1, info = 2, debug = 3 };

/// Receives each message that passes the level. It may throw: the message then goes to stderr.
using log_sink = std::function<void(log_level, std::string_view)>;

/// Replaces the sink (thread-safe); an empty function restores the stderr sink.
void set_log_sink(log_sink sink);

/// Messages above this level are discarded; XTEL_LOG_LEVEL (error, warning, info, debug) sets
/// the initial value, info by default.
void set_log_level(log_level level);

/// True when a message of `level` would be written.
bool log_enabled(log_level level) noexcept;

/// Names the program at the start of each line the stderr sink writes ("<program>: <level>:
/// <message>"), "xtel" by default. A tool names itself, so that its lines and the library's in
/// it read as its own, not as "xtel: info: xtel-exporter: ...". Thread-safe; called before
/// anything is logged, it names the program in XTEL_LOG_LEVEL's complaint too.
void set_log_program(std::string_view program);

/// Writes one finished message (for plugins and tools). Never throws.
void log(log_level level, std::string_view message) noexcept;

}  // namespace xtel
