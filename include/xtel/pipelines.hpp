#pragma once
/// The precompiled pipelines: declared extern here, instantiated once in src/.

#include "xtel/exporters/buffer.hpp"
#include "xtel/exporters/plugin.hpp"
#include "xtel/exporters/prometheus.hpp"
#include "xtel/telemetry.hpp"

namespace xtel {

/// Telemetry off: every record call compiles to nothing.
using disabled_telemetry = telemetry<>;
/// The flight recorder alone (the default when telemetry is enabled).
using buffer_telemetry = telemetry<buffer_exporter>;
/// Third-party exporters loaded from NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR.
using plugin_telemetry = telemetry<plugin_exporter>;
/// The Prometheus endpoint alone.
using prometheus_telemetry = telemetry<prometheus_exporter>;
/// The flight recorder and the Prometheus endpoint.
using buffer_prometheus_telemetry = telemetry<buffer_exporter, prometheus_exporter>;

extern template class telemetry<buffer_exporter>;
extern template class telemetry<plugin_exporter>;
extern template class telemetry<prometheus_exporter>;
extern template class telemetry<buffer_exporter, prometheus_exporter>;
/// The flight recorder and third-party plugins together.
using buffer_plugin_telemetry = telemetry<buffer_exporter, plugin_exporter>;
extern template class telemetry<buffer_exporter, plugin_exporter>;

}  // namespace xtel
