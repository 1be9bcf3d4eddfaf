#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "core/log.hpp"
#include "xtel/http/gzip.hpp"
#include "xtel/push/otlp_traces.hpp"

namespace xtel::push {

namespace {

/// As the metrics pusher's: level 1 (the body is sent once).
constexpr int gzip_level = 1;

}  // namespace

otlp_trace_pusher::otlp_trace_pusher(otlp_trace_options o)
    : options_(std::move(o)), rejected_spans_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    push_options p;
    p.what = "OTLP traces";
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
    // The OTLP/HTTP specification's retryable answers, as for metrics.
    p.retryable = [](long status) {
        return status == 429 || status == 502 || status == 503 || status == 504;
    };
    p.on_success = [rejected = rejected_spans_, url = options_.url](std::string_view body,
                                                                    std::string_view type) {
        if (const auto partial = parse_otlp_response(body, type)) {
            rejected->fetch_add(static_cast<std::uint64_t>(
                                    std::max<std::int64_t>(0, partial->rejected_data_points)),
                                std::memory_order_relaxed);
            detail::log(log_level::warning,
                        "OTLP traces to {}: the receiver rejected {} spans ({})", url,
                        partial->rejected_data_points, partial->error_message);
        }
    };
    sender_ = std::make_unique<http_pusher>(options_.url, std::move(p));
}

void otlp_trace_pusher::push(std::span<const otlp_agent_spans> agents) {
    if (std::none_of(agents.begin(), agents.end(),
                     [](const otlp_agent_spans& a) { return !a.spans.empty(); })) {
        return;
    }
    std::string body = encode_spans(agents, options_.resource, options_.encoding);
    if (options_.gzip) {
        body = http::gzip(body, gzip_level);
    }
    sender_->push(std::move(body));
}

}  // namespace xtel::push
