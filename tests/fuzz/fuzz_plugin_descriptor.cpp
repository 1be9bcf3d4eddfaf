// Fuzz target: the plugin loader's checks of what a plugin hands over. The input is a
// descriptor in raw bytes (API version, which pointers are null, the name and version strings)
// and a plugin name as NIXL_TELEMETRY_EXPORTER would give it:
//
//   bytes 0-3  api (little-endian)     byte 4  bit 0: name null, bit 1: version null,
//                                               bit 2: create null
//   then       <file name> '\n' <descriptor name> '\0' <version>
//
// check_descriptor must accept exactly the descriptors of the current API version with a
// creator, give back printable, bounded strings, and flag a name that differs from the file's;
// the name check must accept exactly the names that plugin_file_name turns into a file name in
// the plugin directory. Anything else is a finding.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "exporters/plugin/plugin_descriptor.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/plugin.hpp"

namespace {

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "fuzz_plugin_descriptor: %s\n", what);
    std::abort();
}

std::unique_ptr<xtel::plugin::exporter_v1> never_called(const xtel::plugin::init_params_v1&) {
    finding("the checks called the creator");
}

void check_printable(const std::string& s) {
    if (s.size() > 4 * xtel::detail::max_plugin_text + 3) {
        finding("a printable string is longer than its bound");
    }
    for (const char c : s) {
        if (c < 0x20 || c > 0x7e) {
            finding("a printable string holds a byte that is not printable ASCII");
        }
    }
}

void check_name(std::string_view name) {
    const bool valid = xtel::is_valid_plugin_name(name);
    try {
        const std::string file = xtel::plugin_file_name(name);
        if (!valid) {
            finding("plugin_file_name accepted a name is_valid_plugin_name refuses");
        }
        if (file.find('/') != std::string::npos || file.find('\0') != std::string::npos ||
            file != "libtelemetry_exporter_" + std::string(name) + ".so") {
            finding(
                "a plugin file name that is not libtelemetry_exporter_<name>.so in the directory");
        }
    } catch (const xtel::exporter_error&) {
        if (valid) {
            finding("plugin_file_name refused a valid name");
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 5) {
        return 0;
    }
    std::uint32_t api = 0;
    std::memcpy(&api, data, 4);
    const std::uint8_t flags = data[4];
    const std::string_view rest(reinterpret_cast<const char*>(data) + 5, size - 5);
    const auto nl = rest.find('\n');
    const std::string_view file_name = rest.substr(0, nl);
    const std::string_view strings =
        nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const auto nul = strings.find('\0');
    // std::string keeps each NUL-terminated, as a plugin's C strings are.
    const std::string name(strings.substr(0, nul));
    const std::string version(nul == std::string_view::npos ? std::string_view()
                                                            : strings.substr(nul + 1));

    check_name(file_name);

    xtel::plugin::descriptor_v1 d;
    d.api = static_cast<xtel::plugin::api_version>(api);
    d.name = (flags & 1) != 0 ? nullptr : name.c_str();
    d.version = (flags & 2) != 0 ? nullptr : version.c_str();
    d.create = (flags & 4) != 0 ? nullptr : &never_called;

    const auto r = xtel::detail::check_descriptor(d, file_name);
    const bool usable = d.api == xtel::plugin::current_api_version && d.create != nullptr;
    if (r.error.empty() != usable) {
        finding("a descriptor accepted or refused against the rules");
    }
    if (!usable) {
        return 0;
    }
    check_printable(r.own_name);
    check_printable(r.version);
    // The name as C code sees it: up to its first NUL.
    const std::string_view own = d.name != nullptr ? std::string_view(d.name) : std::string_view();
    const bool differs = own.size() > xtel::detail::max_plugin_text || own != file_name;
    if (r.name_differs != differs) {
        finding("name_differs is wrong");
    }
    const bool plain =
        own.size() <= xtel::detail::max_plugin_text &&
        own.find_first_of("\\") == std::string_view::npos &&
        std::all_of(own.begin(), own.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    if (plain && r.own_name != own) {
        finding("a printable name was changed");
    }
    return 0;
}
