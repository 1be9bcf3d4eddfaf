// Fuzz target: every NIXL_TELEMETRY_* variable at once, from arbitrary bytes. The only
// acceptable failure is xtel::config_error; anything else escaping is a finding.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "xtel/config.hpp"
#include "xtel/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const char* const vars[] = {
        xtel::env::enable,   xtel::env::buffer_size, xtel::env::run_interval,
        xtel::env::exporter, xtel::env::plugin_dir,  xtel::env::output_path,
    };
    // Values are separated by '\n'; the first byte chooses which variables are set at all.
    std::map<std::string, std::string> table;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const unsigned mask = size > 0 ? static_cast<unsigned char>(input[0]) : 0;
    std::string_view rest = size > 0 ? input.substr(1) : input;
    for (std::size_t i = 0; i < std::size(vars); ++i) {
        const auto nl = rest.find('\n');
        const auto value = rest.substr(0, nl);
        if (mask & (1u << i)) {
            table[vars[i]] = std::string(value);
        }
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    }
    const auto lookup = [&](std::string_view name) -> std::optional<std::string> {
        if (const auto it = table.find(std::string(name)); it != table.end()) {
            return it->second;
        }
        return std::nullopt;
    };
    try {
        const auto c = xtel::config::from_env(lookup);
        if (c.enabled &&
            (c.buffer_size == 0 || c.run_interval.count() == 0 || c.exporters.empty())) {
            __builtin_trap();  // accepted values must be usable
        }
    } catch (const xtel::config_error&) {
    }
    return 0;
}
