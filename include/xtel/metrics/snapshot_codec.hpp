#pragma once
/// A snapshot as bytes: the payload of the node snapshot file, which an agent's node exporter
/// rewrites at every flush and other processes (xtel-exporter) read. docs/node-format.md lays it
/// out byte by byte, so a reader can be written from the doc alone.
///
/// The reader is another process, and the file may be torn, truncated or hostile, so decoding
/// trusts nothing: every count and length is checked against the bytes left and against the
/// limits below before anything is allocated, and only what encode_snapshot writes is accepted
/// (one encoding per snapshot: decode then encode gives back the same bytes).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "xtel/core/error.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics {

/// The version written after the magic. Version 2 added an exemplar's trace and span ids,
/// version 3 native histogram buckets (family_spec::native and native_schema; a native
/// family's series' native_schema, native_first, zero_count and native_buckets); the reader
/// decodes versions 1 to 3 (an agent built before 3 publishes to a newer xtel-exporter) and
/// refuses every other.
inline constexpr std::uint32_t snapshot_codec_version = 3;
/// The oldest version decode_snapshot still reads.
inline constexpr std::uint32_t snapshot_codec_oldest_version = 1;

/// What decode_snapshot accepts at most; a payload past them is refused, not truncated.
struct snapshot_codec_limits {
    static constexpr std::uint32_t max_families = 65536;
    static constexpr std::uint32_t max_series_per_family = 1u << 20;
    /// Labels of the snapshot, label names of a family.
    static constexpr std::uint32_t max_labels = 64;
    static constexpr std::uint32_t max_bounds = 4096;
    static constexpr std::uint32_t max_string_bytes = 1u << 20;
};

/// The labels a snapshot may carry for all its series, each at most once: what an agent's node
/// exporter writes (agent_name, then rank and local_rank when the agent knows them).
inline constexpr std::string_view snapshot_label_names[] = {"agent_name", "rank", "local_rank"};

/// Label names no family may use: the snapshot's own, and those a reader adds to every series
/// it serves (xtel-exporter adds the writer's pid; remote write adds instance).
inline constexpr std::string_view reserved_label_names[] = {"agent_name", "pid", "rank",
                                                            "local_rank", "instance"};

/// Appends the encoding of `s` to `out` (cleared first; its capacity is kept, so a publisher
/// that reuses `out` allocates only when a snapshot outgrows the last).
/// PRECONDITION: `s` is shaped as take_snapshot makes it (the rules decode_snapshot checks:
/// families sorted by name, each series with one value per label name, buckets only for
/// histograms, and within the limits); otherwise decode_snapshot refuses the bytes.
void encode_snapshot(const snapshot& s, std::vector<std::byte>& out);
/// As above, leaving out the family labels named in `left_out_labels` and their values: what a
/// reader adds to every series itself (a node file's writer leaves out xtel_agent_info's pid).
/// PRECONDITION: no two series of a family differ only in a label left out.
void encode_snapshot(const snapshot& s,
                     std::vector<std::byte>& out,
                     std::span<const std::string_view> left_out_labels);

/// Thrown by decode_snapshot: what() is one line saying what is wrong and at which byte offset.
class snapshot_decode_error : public error {
  public:
    using error::error;
};

/// Decodes what encode_snapshot wrote, and only a snapshot that every reader can serve whole:
/// one bad family in one agent's file must not make Prometheus drop the node's whole scrape, nor
/// a receiver refuse the node's whole push. Throws snapshot_decode_error on anything else.
///
/// The bytes: too short, another magic or an unknown version, a count or length past the bytes
/// left or past snapshot_codec_limits, a type other than the four or decimals above 18, a
/// fixed_labels byte other than 0 or 1, families not sorted by name (or a name twice), bounds
/// for a type other than histogram, a series whose number of label values is not the family's
/// number of label names, buckets other than one per bound, exemplars other than none or one
/// per bucket and one for +Inf, bytes after the end; from version 3, a native byte other than
/// 0 or 1, native set on a type other than histogram, a native_schema outside
/// native::min_schema to native::max_schema, more than native::max_buckets native buckets.
///
/// The names: a family name that is not a metric name, or a counter's that does not end in
/// _total; a label name (the snapshot's, a family's, an exemplar's) that is not one
/// (is_label_name); a unit that is not one, or that does not end the family's name
/// (`_<unit>`, before a counter's `_total`); a snapshot label other than snapshot_label_names
/// or one twice; a family label name twice, one of reserved_label_names, `le` in a histogram
/// or `quantile` in a summary; two families that would write a line of the same name
/// (histogram `x` and gauge `x_count`).
///
/// The values: bounds that are not finite or not strictly increasing, also once divided by
/// 10^decimals as they are shown; a series whose label values are another's of its family; a
/// series' native_schema below native::min_schema or above its family's, a native_first whose
/// last bucket's index (native_first + count - 1) is past INT32_MAX, native buckets and
/// zero_count that do not add up to the series' count.
///
/// Messages are one line naming the byte offset, the family and series, and quoting what is
/// wrong printably. Never reads outside `bytes` and allocates in proportion to its size.
snapshot decode_snapshot(std::span<const std::byte> bytes);

}  // namespace xtel::metrics
