#pragma once
/// The exposition formats /metrics serves, rendered from metric snapshots (private to src/):
/// the Prometheus text format 0.0.4, OpenMetrics 1.0.0 and Prometheus's protobuf format.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics {

/// Which format render() writes.
enum class exposition : std::uint8_t {
    /// The Prometheus text format 0.0.4: HELP and TYPE lines, no units, no exemplars.
    text,
    /// OpenMetrics 1.0.0: TYPE, UNIT (for a family with a unit) and HELP lines naming a counter
    /// family without its _total; histogram buckets with their exemplars; `# EOF` at the end.
    openmetrics,
    /// Prometheus's protobuf format: varint-length-delimited io.prometheus.client.MetricFamily
    /// messages, the one format that carries native histograms to Prometheus 2.x.
    protobuf,
};

/// Escapes a label value: backslash, double quote and line feed.
std::string escape_label_value(std::string_view value);
/// Escapes HELP text of the text format: backslash and line feed.
std::string escape_help(std::string_view text);

/// Appends v / 10^decimals exactly, as a sample value shows it: 450 with 6 decimals is
/// 0.000450.
void append_scaled(std::string& out, std::uint64_t v, std::uint8_t decimals);
/// A histogram bucket bound as `le` shows it: divided by 10^decimals like the sum, since bounds
/// are kept in the unit of the observations. Exact for whole bounds (1000 with 6 decimals is
/// 0.001), otherwise the shortest form of the quotient. Other senders of the same series
/// (remote write) use it too, so that both name one series.
std::string format_bound(double bound, std::uint8_t decimals);
/// `in` with each byte that does not start a valid UTF-8 sequence replaced by U+FFFD, as label
/// values are shown.
std::string to_valid_utf8(std::string_view in);

/// Renders snapshots (of several agents) in `format`, appended to `out`: each family once with
/// its descriptors (the first snapshot's that has it), then every snapshot's series of it in
/// the order given, each snapshot's labels first. A snapshot whose family of the same name has
/// another type is left out of that family.
///
/// Values, sums, exemplar values and histogram bounds are shown divided by 10^decimals.
/// Native histograms (family_spec::native): the text formats show their classic form (the
/// buckets of their bounds, if any, then +Inf, _sum and _count); protobuf adds the native
/// fields (src/metrics/protobuf_exposition.hpp says how). Protobuf: every family in its own
/// typed name; a merged family whose snapshots differ in `native` is one MetricFamily per run.
/// OpenMetrics and protobuf only: an exemplar is shown when its label name is a valid label name,
/// with its timestamp unless that is 0. Its labels are `trace_id` and `span_id` when it has them
/// (the span the agent wrote for the transfer), then its own label when all of them hold at most
/// 128 characters together (the format's limit; a longer set would make the whole exposition
/// invalid): one without ids whose own label is longer is not shown. Families take
/// their OpenMetrics names by openmetrics_claims' rule (openmetrics_names.hpp): a counter whose
/// typed names an earlier family holds (gauge `x` and counter `x_total` are both family `x`
/// there) is shown as type unknown under its full name, its samples named as in the text
/// format. Returns the number of families left out because none of their names was free, which
/// a metric store never makes (it refuses such a family) but snapshots of several agents can.
std::size_t render(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
                   std::string& out,
                   exposition format = exposition::text);

}  // namespace xtel::metrics
