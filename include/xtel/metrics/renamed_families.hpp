#pragma once
/// The families renamed in this release (docs/metrics.md, "Renamed in this release"), served
/// under their old names too for one release when NIXL_TELEMETRY_COMPAT_NAMES is set
/// (env::compat_names): a dashboard or rule written for the old names keeps working while it
/// is moved. Off by default; the old names go in the next release, with this header.

#include <string_view>

#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics {

/// An agent family's name before this release and now: the same family, the same series.
struct renamed_family {
    std::string_view old_name;
    std::string_view new_name;
};

/// The pipeline's own health took the xtel_telemetry_ prefix: xtel_exporter_ is the
/// xtel-exporter program's.
inline constexpr renamed_family renamed_families[] = {
    {.old_name = "xtel_exporter_up", .new_name = "xtel_telemetry_exporter_up"},
    {.old_name = "xtel_exporter_events_lost_total",
     .new_name = "xtel_telemetry_exporter_events_lost_total"},
    {.old_name = "xtel_prometheus_ignored_events_total",
     .new_name = "xtel_telemetry_events_unmapped_total"},
};

/// Adds to `s`, in name order, a copy of each renamed family it holds under the family's old
/// name (its HELP says so). A family already under its old name is left as it is.
void add_old_names(snapshot& s);

}  // namespace xtel::metrics
