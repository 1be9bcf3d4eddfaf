#pragma once
/// The OpenTelemetry variables xtel-exporter reads for OTLP, each name written here once: the
/// settings (otlp_config.cpp) read them, and a build without the push clients names them to say
/// that OTLP is not in it. Header only, so that such a build can use it.

#include <array>
#include <string_view>

namespace xtel::push::otel_env {

inline constexpr std::string_view metrics_exporter = "OTEL_METRICS_EXPORTER";
inline constexpr std::string_view endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT";
inline constexpr std::string_view metrics_endpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
inline constexpr std::string_view protocol = "OTEL_EXPORTER_OTLP_PROTOCOL";
inline constexpr std::string_view metrics_protocol = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";
inline constexpr std::string_view temporality_preference =
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";
inline constexpr std::string_view compression = "OTEL_EXPORTER_OTLP_COMPRESSION";
inline constexpr std::string_view metrics_compression = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION";
inline constexpr std::string_view timeout = "OTEL_EXPORTER_OTLP_TIMEOUT";
inline constexpr std::string_view metrics_timeout = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT";
inline constexpr std::string_view headers = "OTEL_EXPORTER_OTLP_HEADERS";
inline constexpr std::string_view metrics_headers = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
inline constexpr std::string_view export_interval = "OTEL_METRIC_EXPORT_INTERVAL";
inline constexpr std::string_view traces_exporter = "OTEL_TRACES_EXPORTER";
inline constexpr std::string_view traces_endpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
inline constexpr std::string_view traces_protocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
inline constexpr std::string_view traces_compression = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
inline constexpr std::string_view traces_timeout = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
inline constexpr std::string_view traces_headers = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
inline constexpr std::string_view resource_attributes = "OTEL_RESOURCE_ATTRIBUTES";
inline constexpr std::string_view service_name = "OTEL_SERVICE_NAME";

/// The variables that turn OTLP on, either one set (with --otlp-endpoint, the flag).
inline constexpr std::array<std::string_view, 2> endpoints = {endpoint, metrics_endpoint};

}  // namespace xtel::push::otel_env
