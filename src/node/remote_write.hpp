#pragma once
/// The Prometheus remote-write 1.0 client of the node's exporter program: the node's merged
/// metric snapshots encoded as one WriteRequest (protobuf, snappy block format), and a sender
/// that POSTs such bodies from a thread of its own, in order, retrying while the receiver is
/// down. The series are those a scrape of the same snapshots shows (prometheus_text.hpp), so a
/// node may be scraped or push without its series changing names.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "xtel/error.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::node {

/// A remote writer that cannot be set up (a URL libcurl refuses, options out of range).
class remote_write_error : public error {
  public:
    using error::error;
};

/// The snapshots as one snappy-compressed (block format) WriteRequest, every sample at
/// `timestamp_ms` (ms since the Unix epoch). Each series' labels are `__name__`, the
/// snapshot's labels, the family's, `external_labels` (those of its names that the series
/// has not already: Prometheus's external_labels rule) and `le` for buckets, sorted by name as
/// remote write requires. Counters and gauges: one sample, divided by 10^decimals. Histograms: the
/// classic series `<name>_bucket` (cumulative, `le` as scraped, +Inf the count), `<name>_sum`,
/// `<name>_count`; summaries `<name>_sum` and `<name>_count`. A family whose name an earlier
/// snapshot gave another type is left out of that snapshot, as a scrape leaves it out.
std::string encode_write_request(
    std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
    std::int64_t timestamp_ms,
    std::span<const metrics::label> external_labels = {});

struct remote_write_options {
    /// Bodies waiting to be sent, the one being sent among them; a push to a full queue drops
    /// the oldest (counted in dropped()). At least 1.
    std::size_t queue_capacity = 64;
    /// The most one POST may take, connecting included; also how long the destructor may wait
    /// for one in flight.
    std::chrono::milliseconds timeout{10'000};
    /// After a failed attempt the next waits 100 ms, doubling up to this, with jitter.
    std::chrono::milliseconds max_backoff{5'000};
};

/// Sends bodies (encode_write_request's) to a remote-write receiver from a thread of its own,
/// one at a time, in the order pushed. 2xx: sent. 5xx, 429 and connection errors: the body
/// stays first in the queue and is tried again after a backoff (counted in failed_attempts()).
/// Any other answer (4xx: the receiver will never take it): dropped, logged once, counted in
/// rejected(). The counters may be read from any thread.
class remote_writer {
  public:
    /// Starts the sending thread. Throws remote_write_error when `url` is not http(s) or
    /// capacity is 0.
    remote_writer(std::string url, remote_write_options o = {});
    /// Stops the thread: a POST in flight is abandoned (within `timeout`), bodies queued are
    /// not sent.
    ~remote_writer();

    remote_writer(const remote_writer&) = delete;
    remote_writer& operator=(const remote_writer&) = delete;

    /// Queues `compressed_body` for sending; drops the oldest queued body when full.
    void push(std::string compressed_body);

    /// Bodies the receiver took (2xx).
    std::uint64_t sent() const noexcept { return sent_.load(std::memory_order_relaxed); }
    /// Attempts that failed and will be retried: connection errors, 5xx, 429.
    std::uint64_t failed_attempts() const noexcept {
        return failed_attempts_.load(std::memory_order_relaxed);
    }
    /// Bodies dropped unsent because the queue was full.
    std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    /// Bodies the receiver refused for good (4xx other than 429, or another answer).
    std::uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
    /// Bodies waiting, the one in flight included.
    std::size_t queued() const;

  private:
    struct item {
        std::uint64_t id = 0;
        std::shared_ptr<const std::string> body;
    };

    void run();
    /// Waits `d` or until stopped; false when stopped.
    bool sleep_for(std::chrono::milliseconds d);

    std::string url_;
    remote_write_options options_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<item> queue_;  // guarded by mutex_
    std::uint64_t next_id_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<std::uint64_t> sent_{0};
    std::atomic<std::uint64_t> failed_attempts_{0};
    std::atomic<std::uint64_t> dropped_{0};
    std::atomic<std::uint64_t> rejected_{0};
    std::thread thread_;  // last: starts once the rest is built
};

}  // namespace xtel::node
