#pragma once
/// xtel's diagnostics: a replaceable sink, stderr by default. Never called on the record path.

#include <functional>
#include <string_view>

namespace xtel {

enum class log_level { error = 0, warning = 1, info = 2, debug = 3 };

using log_sink = std::function<void(log_level, std::string_view)>;

/// Replaces the sink (thread-safe); an empty function restores the stderr sink.
void set_log_sink(log_sink sink);

/// Messages above this level are discarded; XTEL_LOG_LEVEL (error, warning, info, debug) sets
/// the initial value, info by default.
void set_log_level(log_level level);

void log(log_level level, std::string_view message);

}  // namespace xtel
