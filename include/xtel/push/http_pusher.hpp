#pragma once
/// The sender behind xtel-exporter's pushes (Prometheus remote write, OTLP/HTTP): bodies POSTed
/// to one URL from a thread of its own, in the order pushed, from a bounded queue, retried with
/// exponential backoff while the receiver is down or busy. What a push protocol adds (its
/// headers, which answers are worth a retry, what a 2xx answer says) comes in push_options.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "xtel/core/error.hpp"

namespace xtel::push {

/// A sender that cannot be set up (a URL that is not http(s), options out of range).
class push_error : public error {
  public:
    using error::error;
};

struct push_options {
    /// What is pushed, for the log ("remote write", "OTLP").
    std::string what = "push";
    /// Headers of every POST ("Content-Type: application/x-protobuf").
    std::vector<std::string> headers;
    /// Bodies waiting to be sent, the one being sent among them; a push to a full queue drops
    /// the oldest (counted in dropped()). At least 1.
    std::size_t queue_capacity = 64;
    /// The most one POST may take, connecting included; also how long the destructor may wait
    /// for one in flight.
    std::chrono::milliseconds timeout{10'000};
    /// After a failed attempt the next waits 100 ms, doubling up to this, with jitter; a
    /// Retry-After the receiver sends is waited instead when longer (up to max_retry_after).
    std::chrono::milliseconds max_backoff{5'000};
    std::chrono::milliseconds max_retry_after{std::chrono::minutes(5)};
    /// Whether an answer with this status (not 2xx) is tried again; otherwise the body is
    /// dropped as rejected. Unset: 429 and 5xx.
    std::function<bool(long status)> retryable;
    /// Called on the sending thread with each 2xx answer's body (its first 64 KiB) and
    /// Content-Type, for a protocol whose answers say more (OTLP's partial success).
    std::function<void(std::string_view body, std::string_view content_type)> on_success;
};

/// Sends bodies to `url` from a thread of its own, one at a time, in the order pushed. 2xx:
/// sent. A retryable answer or a connection error: the body stays first in the queue and is
/// tried again after a backoff (counted in failed_attempts()). Any other answer (the receiver
/// will never take it): dropped, logged, counted in rejected(). The counters may be read from
/// any thread.
class http_pusher {
  public:
    /// Starts the sending thread. Throws push_error when `url` is not http(s) or the queue's
    /// capacity is 0.
    http_pusher(std::string url, push_options o);
    /// Stops the thread: a POST in flight is abandoned (within `timeout`), bodies queued are
    /// not sent.
    ~http_pusher();

    http_pusher(const http_pusher&) = delete;
    http_pusher& operator=(const http_pusher&) = delete;

    /// Queues `body` for sending; drops the oldest queued body when full.
    void push(std::string body);

    /// Bodies the receiver took (2xx).
    std::uint64_t sent() const noexcept { return sent_.load(std::memory_order_relaxed); }
    /// Attempts that failed and will be retried.
    std::uint64_t failed_attempts() const noexcept {
        return failed_attempts_.load(std::memory_order_relaxed);
    }
    /// Bodies dropped unsent because the queue was full.
    std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    /// Bodies the receiver refused for good.
    std::uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
    /// Bodies waiting, the one in flight included.
    std::size_t queued() const;

    const std::string& url() const noexcept { return url_; }

  private:
    struct item {
        std::uint64_t id = 0;
        std::shared_ptr<const std::string> body;
    };

    void run();
    /// Waits `d` or until stopped; false when stopped.
    bool sleep_for(std::chrono::milliseconds d);

    std::string url_;
    push_options options_;
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

/// The wait a Retry-After header's value asks for at `now` (seconds since the epoch): a number
/// of seconds, or an HTTP date; nullopt when it is neither or is empty.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value, std::int64_t now);

}  // namespace xtel::push
