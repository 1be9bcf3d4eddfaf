#pragma once
/// The loader's checks of what a plugin hands over (private to src/): its descriptor, and the
/// text of what it throws. Plugin strings end up in the agent's log, so they are bounded and
/// made printable first: a plugin cannot write a megabyte, a fake log line or a terminal
/// escape sequence into it. tests/fuzz/fuzz_plugin_descriptor.cpp fuzzes both.

#include <cstddef>
#include <string>
#include <string_view>

#include "xtel/plugin/exporter_v1.hpp"

namespace xtel::detail {

/// Bytes of a plugin's string that are read (a descriptor's name and version, an exception's
/// message); what is longer is cut, and the cut marked with "...".
inline constexpr std::size_t max_plugin_text = 256;

/// `text` cut to `max` bytes, every byte outside printable ASCII written as \xNN and a
/// backslash as \\; "..." marks a cut. At most 4 * max + 3 characters, all printable ASCII.
std::string printable(std::string_view text, std::size_t max = max_plugin_text);

/// A NUL-terminated string of a plugin, read up to max_plugin_text + 1 bytes, made printable;
/// "" for a null pointer. PRECONDITION: `s` is null or points at a NUL-terminated string or at
/// more than max_plugin_text readable bytes.
std::string printable_c_string(const char* s);

/// What the loader keeps of a descriptor.
struct descriptor_check {
    /// Empty when the descriptor can be used; otherwise why not, one line.
    std::string error;
    /// The name the descriptor gives itself, printable.
    std::string own_name;
    /// The plugin's version, printable.
    std::string version;
    /// The descriptor names the plugin other than its file does (a warning, not an error); so
    /// does a name longer than max_plugin_text, which no plugin file name is.
    bool name_differs = false;
};

/// Checks the descriptor a plugin's init returned, for the plugin known by `file_name` (its
/// file's `<name>`): the API version first (the only member every version shares), then a
/// creator, then the strings. The strings are only read, never kept as pointers.
descriptor_check check_descriptor(const plugin::descriptor_v1& d, std::string_view file_name);

}  // namespace xtel::detail
