#pragma once
/// The standard process metrics (private to src/): what the process that serves /metrics costs,
/// read from /proc/self on Linux, under the names every Prometheus client library uses, so the
/// usual dashboards and alerts find them.

#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics {

/// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
/// process_start_time_seconds, process_open_fds and process_max_fds, without labels, as they
/// are now. A value that cannot be read (no /proc) is left out, never made up.
metrics::snapshot process_snapshot();

}  // namespace xtel::metrics
