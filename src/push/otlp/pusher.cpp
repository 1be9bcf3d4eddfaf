#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "core/log.hpp"
#include "xtel/http/gzip.hpp"
#include "xtel/push/otlp.hpp"

namespace xtel::push {

namespace {

/// What the pusher's gzip costs: level 1, as the scrapes' (the body is sent once).
constexpr int gzip_level = 1;

}  // namespace

otlp_pusher::otlp_pusher(otlp_options o)
    : options_(std::move(o)),
      encoder_(options_.resource, options_.temporality),
      rejected_points_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    push_options p;
    p.what = "OTLP";
    p.headers.push_back(options_.encoding == otlp_encoding::protobuf
                            ? "Content-Type: application/x-protobuf"
                            : "Content-Type: application/json");
    if (options_.gzip) {
        p.headers.push_back("Content-Encoding: gzip");
    }
    for (const auto& [name, value] : options_.headers) {
        p.headers.push_back(name + ": " + value);
    }
    p.queue_capacity = options_.queue_capacity;
    p.timeout = options_.timeout;
    // The OTLP/HTTP specification's retryable answers.
    p.retryable = [](long status) {
        return status == 429 || status == 502 || status == 503 || status == 504;
    };
    p.on_success = [rejected = rejected_points_, url = options_.url](std::string_view body,
                                                                     std::string_view type) {
        if (const auto partial = parse_otlp_response(body, type)) {
            rejected->fetch_add(static_cast<std::uint64_t>(
                                    std::max<std::int64_t>(0, partial->rejected_data_points)),
                                std::memory_order_relaxed);
            detail::log(log_level::warning, "OTLP to {}: the receiver rejected {} points ({})", url,
                        partial->rejected_data_points, partial->error_message);
        }
    };
    sender_ = std::make_unique<http_pusher>(options_.url, std::move(p));
}

void otlp_pusher::push(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
                       std::uint64_t now_ns) {
    std::string body = encoder_.encode(snapshots, now_ns, options_.encoding);
    if (options_.gzip) {
        body = http::gzip(body, gzip_level);
    }
    sender_->push(std::move(body));
}

}  // namespace xtel::push
