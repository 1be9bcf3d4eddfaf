#include <string>
#include <string_view>
#include <vector>

#include "otlp_trace.pb.h"
#include "push/otlp/attributes.hpp"
#include "push/otlp/json_writer.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/version.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/push/otlp_traces.hpp"

namespace xtel::push {

namespace pb = xtel::otlp;
using trace::span_ring::span_record;

namespace {

std::string_view operation_name(std::uint8_t op) {
    switch (op) {
        case 0:
            return "read";
        case 1:
            return "write";
        default:
            return "transfer";
    }
}

std::string_view reason_name(std::uint8_t reason) {
    switch (reason) {
        case 1:
            return "failed";
        case 2:
            return "slow";
        case 3:
            return "sampled";
        default:
            return "unknown";
    }
}

std::string_view origin_name(std::uint8_t origin) {
    switch (origin) {
        case 1:
            return "traceparent";
        case 2:
            return "trace_id";
        case 3:
            return "derived";
        default:
            return "none";
    }
}

pb::Span::SpanKind kind_of(std::uint8_t kind) {
    switch (static_cast<trace::span_ring::side>(kind)) {
        case trace::span_ring::side::initiator:
            return pb::Span::SPAN_KIND_CLIENT;
        case trace::span_ring::side::target:
            return pb::Span::SPAN_KIND_SERVER;
    }
    return pb::Span::SPAN_KIND_UNSPECIFIED;
}

template <std::size_t N>
std::string bytes_of(const std::array<std::uint8_t, N>& id) {
    return std::string(reinterpret_cast<const char*>(id.data()), N);
}

/// The agent's labels as its node snapshot carries them, so that its spans and its metrics
/// share one resource: agent_name, rank and local_rank when known, the writer's pid.
std::vector<metrics::label> labels_of(const otlp_agent_spans& a) {
    std::vector<metrics::label> out{{"agent_name", a.agent_name}};
    const span_record& first = a.spans.front();
    if (first.rank >= 0) {
        out.push_back({"rank", std::to_string(first.rank)});
    }
    if (first.local_rank >= 0) {
        out.push_back({"local_rank", std::to_string(first.local_rank)});
    }
    if (a.pid != 0) {
        out.push_back({"pid", std::to_string(a.pid)});
    }
    return out;
}

void add_span(pb::ScopeSpans& scope, const span_record& r) {
    using detail::put;
    pb::Span& s = *scope.add_spans();
    s.set_trace_id(bytes_of(r.trace));
    s.set_span_id(bytes_of(r.span));
    if (!trace::is_zero(r.parent)) {
        s.set_parent_span_id(bytes_of(r.parent));
    }
    // The caller's trace-flags; a parent is always the caller's (a traceparent), in another
    // process, and a root span has none: whether the parent is remote is known either way.
    std::uint32_t flags = r.trace_flags | pb::SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK;
    if (!trace::is_zero(r.parent)) {
        flags |= pb::SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK;
    }
    s.set_flags(flags);
    const std::string_view op = operation_name(r.operation);
    const std::string_view remote = trace::span_ring::text(r.remote_agent);
    std::string name(op);
    if (!remote.empty()) {
        name += ' ';
        name += remote;
    }
    s.set_name(metrics::to_valid_utf8(name));
    s.set_kind(kind_of(r.kind));
    s.set_start_time_unix_nano(r.start_us * 1000);
    s.set_end_time_unix_nano(r.end_us * 1000);

    auto& attrs = *s.mutable_attributes();
    put(attrs, "xtel.operation", op);
    if (!remote.empty()) {
        put(attrs, "xtel.peer.agent", remote);
    }
    put(attrs, "xtel.transfer.bytes", static_cast<std::int64_t>(r.bytes));
    if (r.descriptors != 0) {  // 0: the agent did not record it
        put(attrs, "xtel.transfer.descriptors", static_cast<std::int64_t>(r.descriptors));
    }
    if (r.lanes != 0) {
        put(attrs, "xtel.transfer.lanes", static_cast<std::int64_t>(r.lanes));
    }
    put(attrs, "xtel.transfer.status", to_string(static_cast<status_code>(r.status)));
    put(attrs, "xtel.transfer.status_code", static_cast<std::int64_t>(r.status));
    if (const std::string_view request = trace::span_ring::text(r.request_id); !request.empty()) {
        put(attrs, "xtel.request_id", request);
    }
    put(attrs, "xtel.span.reason", reason_name(r.reason));
    put(attrs, "xtel.trace.origin", origin_name(r.origin));

    pb::Span::Event& post = *s.add_events();
    post.set_time_unix_nano(r.start_us * 1000);
    post.set_name("post");
    pb::Span::Event& end = *s.add_events();
    end.set_time_unix_nano(r.end_us * 1000);
    if (r.status != 0) {
        const std::string_view status = to_string(static_cast<status_code>(r.status));
        end.set_name("failure");
        // OpenTelemetry's attribute for the class of an error.
        put(attrs, "error.type", status);
        s.mutable_status()->set_code(pb::Status::STATUS_CODE_ERROR);
        s.mutable_status()->set_message("transfer failed: " + std::string(status));
    } else {
        // A success leaves the status unset, as OpenTelemetry asks of instrumentation.
        end.set_name("completion");
    }
}

}  // namespace

std::string encode_spans(std::span<const otlp_agent_spans> agents,
                         const otlp_resource& resource,
                         otlp_encoding encoding) {
    pb::ExportTraceServiceRequest request;
    for (const otlp_agent_spans& a : agents) {
        if (a.spans.empty()) {
            continue;
        }
        pb::ResourceSpans& rs = *request.add_resource_spans();
        const std::vector<metrics::label> labels = labels_of(a);
        detail::fill_agent_resource(*rs.mutable_resource(), resource, labels);
        pb::ScopeSpans& scope = *rs.add_scope_spans();
        scope.mutable_scope()->set_name("xtel");
        scope.mutable_scope()->set_version(std::string(version()));
        for (const span_record& r : a.spans) {
            add_span(scope, r);
        }
    }
    if (encoding == otlp_encoding::protobuf) {
        return request.SerializeAsString();
    }
    return detail::to_json(request);
}

}  // namespace xtel::push
