#pragma once
/// xtel-exporter's OTLP settings, the OpenTelemetry way: the OTEL_EXPORTER_OTLP_* and OTEL_*
/// variables of the OpenTelemetry specification, then the program's --otlp-* flags, which
/// override them. A malformed value is a config_error naming the variable (or flag), the value
/// and what is accepted, as the NIXL_TELEMETRY_* variables' are.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/push/otlp.hpp"

namespace xtel::push {

/// The --otlp-* flags as given (unset: not given); checked by otlp_options_from.
struct otlp_flags {
    std::optional<std::string> endpoint;     ///< as OTEL_EXPORTER_OTLP_ENDPOINT
    std::optional<std::string> protocol;     ///< http/protobuf, http/json
    std::optional<std::string> temporality;  ///< cumulative, delta, lowmemory
    std::optional<std::string> compression;  ///< gzip, none
    std::optional<std::string> interval_s;   ///< seconds
    std::vector<std::string> headers;        ///< NAME=VALUE each, added to the variables'
};

/// The OTLP options asked for; nullopt when OTLP is off: no endpoint is set (neither
/// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT nor --otlp-endpoint), or
/// OTEL_METRICS_EXPORTER is "none". `host_name` is host.name unless OTEL_RESOURCE_ATTRIBUTES
/// sets it. Throws config_error.
std::optional<otlp_options> otlp_options_from(const env_lookup& env,
                                              const otlp_flags& flags,
                                              std::string host_name);

/// OTEL_EXPORTER_OTLP_HEADERS' and OTEL_RESOURCE_ATTRIBUTES' form: `key=value` pairs separated
/// by commas, white space around each trimmed, values percent-decoded. Throws config_error
/// naming `var`.
std::vector<std::pair<std::string, std::string>> key_value_list(std::string_view var,
                                                                std::string_view value);

}  // namespace xtel::push
