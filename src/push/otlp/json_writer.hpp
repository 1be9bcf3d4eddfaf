#pragma once
/// ExportMetricsServiceRequest and ExportTraceServiceRequest in OTLP's JSON encoding (private
/// to src/push/).

#include <string>

#include "otlp_metrics.pb.h"
#include "otlp_trace.pb.h"

namespace xtel::push::detail {

/// `request` by OTLP's rules: the proto3 JSON mapping with lowerCamelCase names, 64-bit
/// integers as decimal strings, enums as numbers, trace and span ids as hex. Fields at their
/// default are left out, as the mapping allows; a oneof's value is always written.
std::string to_json(const xtel::otlp::ExportMetricsServiceRequest& request);
/// `request` by the same rules.
std::string to_json(const xtel::otlp::ExportTraceServiceRequest& request);

}  // namespace xtel::push::detail
