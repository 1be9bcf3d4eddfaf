#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "push/otlp/sender.hpp"
#include "xtel/push/otlp.hpp"

namespace xtel::push {

otlp_pusher::otlp_pusher(otlp_options o)
    : options_(std::move(o)),
      encoder_(options_.resource, options_.temporality),
      rejected_points_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    sender_ = std::make_unique<http_pusher>(
        options_.url,
        detail::sender_options(detail::settings_of(options_, "OTLP", "points"), rejected_points_));
}

void otlp_pusher::push(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
                       std::uint64_t now_ns) {
    std::string body = encoder_.encode(snapshots, now_ns, options_.encoding);
    sender_->push(detail::compressed(std::move(body), options_.gzip));
}

}  // namespace xtel::push
