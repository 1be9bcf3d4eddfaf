#pragma once
/// Parsers for the values of environment variables, shared by the core configuration and every
/// exporter's settings. Each one throws config_error naming the variable, quoting the value and
/// saying what is accepted.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace xtel::parse {

/// Throws config_error "<var>='<value>' is invalid: <accepted>", the one shape every
/// configuration error has. Control bytes in it (the value's, or a part of it that `accepted`
/// quotes) are shown as escape_controls writes them, so the message stays one line.
[[noreturn]] void fail(std::string_view var, std::string_view value, std::string_view accepted);

/// How printable() shows a string that came from outside (a value, a file, a peer).
enum class shown : std::uint8_t {
    /// Each control byte escaped: \r, \n, \t, the others (and DEL) as \xNN. Bytes from 0x80
    /// up are kept, so UTF-8 stays readable.
    escaped,
    /// In double quotes, '"' and '\' escaped with a backslash, every byte outside printable
    /// ASCII as \xNN, and "..." after the closing quote when cut.
    quoted,
    /// Each control byte (and DEL) replaced by '?'; bytes from 0x80 up kept.
    replaced,
};

/// `s`, of which at most `max_bytes` are shown, in the style `how`: one line, whatever the
/// bytes, for a message or a log line that quotes input.
std::string printable(std::string_view s,
                      shown how,
                      std::size_t max_bytes = std::string_view::npos);

/// printable(s, shown::escaped): every byte of `s`, its control bytes escaped.
inline std::string escape_controls(std::string_view s) {
    return printable(s, shown::escaped);
}

/// `s` without the white space (std::isspace in the C locale) at either end.
std::string_view trim(std::string_view s);

/// Whether an item of a comma-separated list may appear more than once.
enum class repeats : bool { allowed, refused };

/// The items of a comma-separated list, each trimmed, in order; views into `value`. Fails with
/// `accepted` for an empty item (an empty value, ",,", a comma at either end) and, when
/// repeats are refused, with "<item> is named twice; <accepted>" for an item given again.
/// Callers check each item's own form.
std::vector<std::string_view> comma_list(std::string_view var,
                                         std::string_view value,
                                         std::string_view accepted,
                                         repeats rule);

bool boolean(std::string_view var, std::string_view value);

/// Digits only (no sign, no spaces, no units), from `min` to `max`.
std::uint64_t unsigned_integer(std::string_view var,
                               std::string_view value,
                               std::uint64_t min,
                               std::uint64_t max);

/// NIXL_TELEMETRY_EXPORTER's form: names of letters, digits, '_' and '-', comma-separated,
/// each at most once.
std::vector<std::string> name_list(std::string_view var, std::string_view value);

std::filesystem::path existing_directory(std::string_view var, std::string_view value);

/// A command-line argument, "--name=value" split at its first '=' (xtel-exporter, xtel top).
struct option_arg {
    std::string_view name;   ///< the whole argument when it holds no value
    std::string_view value;  ///< after the '='; empty without one
    bool has_value = false;  ///< an '=' followed the name
};

/// `arg` split: only an argument that starts with "--" and holds an '=' has a value.
option_arg split_option(std::string_view arg) noexcept;

/// A name usable as a single path component ([A-Za-z0-9_.-], not "." or ".."), for agent
/// names that become file names; throws config_error naming `what`.
void file_name(std::string_view what, std::string_view value);

}  // namespace xtel::parse
