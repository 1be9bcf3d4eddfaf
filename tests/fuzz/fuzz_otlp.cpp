// Fuzz target: what xtel-exporter reads from outside for OTLP. The input's first line is the
// Content-Type of a receiver's 2xx answer and the rest its body (parse_otlp_response); the
// same bytes, split at '\n', are also the values of the OTEL_* variables (otlp_options_from).
// The only acceptable failure is xtel::config_error from the settings, and its message is one
// line; what the settings accept is a URL libcurl takes and headers that cannot end early.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "xtel/core/error.hpp"
#include "xtel/push/otlp.hpp"
#include "xtel/push/otlp_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto nl = input.find('\n');
    const std::string_view type = input.substr(0, nl);
    const std::string_view body =
        nl == std::string_view::npos ? std::string_view{} : input.substr(nl + 1);
    if (const auto p = xtel::push::parse_otlp_response(body, type)) {
        // The message is cut to what a log line may hold, without control characters.
        if (p->error_message.size() > 512) {
            __builtin_trap();
        }
        for (const char c : p->error_message) {
            if (static_cast<unsigned char>(c) < 0x20) {
                __builtin_trap();
            }
        }
    }

    static const char* const vars[] = {
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT",  "OTEL_EXPORTER_OTLP_COMPRESSION",
        "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
        "OTEL_METRICS_EXPORTER",
    };
    std::map<std::string, std::string> table;
    std::string_view rest = input;
    for (const char* var : vars) {
        const auto end = rest.find('\n');
        table[var] = std::string(rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
    const auto lookup = [&](std::string_view name) -> std::optional<std::string> {
        if (const auto it = table.find(std::string(name)); it != table.end()) {
            return it->second;
        }
        return std::nullopt;
    };
    try {
        if (const auto o = xtel::push::otlp_options_from(lookup, {}, "host")) {
            // What the settings let through is what the sender's headers become.
            for (const auto& [name, value] : o->headers) {
                if (name.empty() || value.find_first_of("\r\n") != std::string::npos) {
                    __builtin_trap();
                }
            }
            // The URL is one libcurl takes: a scheme, a host, no space or control byte.
            if (!o->url.starts_with("http://") && !o->url.starts_with("https://")) {
                __builtin_trap();
            }
            const std::string_view after_scheme =
                std::string_view(o->url).substr(o->url.find("://") + 3);
            if (after_scheme.empty() || after_scheme[0] == '/' || after_scheme[0] == ':') {
                __builtin_trap();
            }
            for (const char c : o->url) {
                if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
                    __builtin_trap();
                }
            }
        }
    } catch (const xtel::config_error& e) {
        // One line whatever the bytes: the value's control bytes are shown escaped.
        for (const char c : std::string_view(e.what())) {
            if (static_cast<unsigned char>(c) < 0x20) {
                __builtin_trap();
            }
        }
    }
    return 0;
}
