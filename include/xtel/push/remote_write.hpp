#pragma once
/// The Prometheus remote-write 1.0 client of xtel-exporter: the node's merged
/// metric snapshots encoded as one WriteRequest (protobuf, snappy block format), and a sender
/// that POSTs such bodies from a thread of its own, in order, retrying while the receiver is
/// down. The series are those a scrape of the same snapshots shows (xtel/metrics/exposition.hpp),
/// so a node may be scraped or push without its series changing names.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "xtel/metrics/snapshot.hpp"
#include "xtel/push/http_pusher.hpp"

namespace xtel::push {

/// A remote writer that cannot be set up (a URL that is not http(s), options out of range).
using remote_write_error = push_error;

/// The snapshots as one snappy-compressed (block format) WriteRequest, every sample at
/// `timestamp_ms` (ms since the Unix epoch). Each series' labels are `__name__`, the
/// snapshot's labels, the family's, `external_labels` (those of its names that the series
/// has not already: Prometheus's external_labels rule) and `le` for buckets, sorted by name as
/// remote write requires. Counters and gauges: one sample, divided by 10^decimals. Histograms: the
/// classic series `<name>_bucket` (cumulative, `le` as scraped, +Inf the count), `<name>_sum`,
/// `<name>_count`; summaries `<name>_sum` and `<name>_count`. A histogram with native buckets:
/// one series `<name>` with one native histogram (Prometheus's remote-write Histogram: integer
/// counts, the series' schema, positive spans and deltas), plus the classic series above when it
/// keeps classic bounds too (NIXL_TELEMETRY_HISTOGRAM_KIND=both). A family whose name an earlier
/// snapshot gave another type is left out of that snapshot, as a scrape leaves it out.
std::string encode_write_request(
    std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
    std::int64_t timestamp_ms,
    std::span<const metrics::label> external_labels = {});

struct remote_write_options {
    /// As push_options's.
    std::size_t queue_capacity = 64;
    std::chrono::milliseconds timeout{10'000};
    std::chrono::milliseconds max_backoff{5'000};
};

/// Sends bodies (encode_write_request's) to a remote-write receiver (http_pusher): with the
/// remote-write headers; 5xx, 429 and connection errors are retried, any other answer (4xx:
/// the receiver will never take it) drops the body, counted in rejected().
class remote_writer : public http_pusher {
  public:
    /// Starts the sending thread. Throws remote_write_error when `url` is not http(s) or
    /// capacity is 0.
    explicit remote_writer(std::string url, remote_write_options o = {});
};

}  // namespace xtel::push
