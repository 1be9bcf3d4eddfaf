#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "push/otlp/sender.hpp"
#include "xtel/push/otlp_traces.hpp"

namespace xtel::push {

otlp_trace_pusher::otlp_trace_pusher(otlp_trace_options o)
    : options_(std::move(o)), rejected_spans_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    sender_ = std::make_unique<http_pusher>(
        options_.url, detail::sender_options(detail::settings_of(options_, "OTLP traces", "spans"),
                                             rejected_spans_));
}

void otlp_trace_pusher::push(std::span<const otlp_agent_spans> agents) {
    if (std::none_of(agents.begin(), agents.end(),
                     [](const otlp_agent_spans& a) { return !a.spans.empty(); })) {
        return;
    }
    std::string body = encode_spans(agents, options_.resource, options_.encoding);
    sender_->push(detail::compressed(std::move(body), options_.gzip));
}

}  // namespace xtel::push
