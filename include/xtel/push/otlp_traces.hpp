#pragma once
/// The OTLP/HTTP traces client of xtel-exporter: the spans the agents leave in their span rings
/// (xtel/trace/span_ring.hpp) as one ExportTraceServiceRequest, in either encoding OTLP/HTTP
/// defines, sent by http_pusher to <endpoint>/v1/traces. docs/otlp.md ("Traces") has the
/// mapping, field by field, and the attributes xtel names itself.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/push/http_pusher.hpp"
#include "xtel/push/otlp.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::push {

/// One agent's spans, as read from its span ring: the resource they are exported under.
struct otlp_agent_spans {
    std::string agent_name;  ///< the ring's agent (its header's name)
    std::uint32_t pid = 0;   ///< the ring's writer; 0: unknown (no process.pid)
    std::vector<trace::span_ring::span_record> spans;
};

/// The body (not compressed) of one export of `agents`' spans: one ResourceSpans per agent
/// that has spans (the resource the metrics give that agent: service.name, host.name,
/// process.pid, xtel.agent.name, xtel.rank, xtel.local_rank, OTEL_RESOURCE_ATTRIBUTES), each
/// with one scope "xtel".
std::string encode_spans(std::span<const otlp_agent_spans> agents,
                         const otlp_resource& resource,
                         otlp_encoding encoding);

/// Where and how xtel-exporter sends traces: the OTEL_EXPORTER_OTLP_TRACES_* variables, else
/// the generic OTEL_EXPORTER_OTLP_* ones.
struct otlp_trace_options {
    /// The full URL POSTed to (<endpoint>/v1/traces).
    std::string url;
    otlp_encoding encoding = otlp_encoding::protobuf;
    bool gzip = false;
    /// Extra headers, name and value.
    std::vector<std::pair<std::string, std::string>> headers;
    std::chrono::milliseconds timeout{10'000};
    otlp_resource resource;
    /// Exports waiting to be sent; a push beyond them drops the oldest (counted by the sender).
    std::size_t queue_capacity = 64;
};

/// The trace options asked for; nullopt when traces are off: OTEL_TRACES_EXPORTER is "none",
/// or neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set.
/// OTEL_TRACES_EXPORTER accepts otlp and none. `host_name` is host.name unless
/// OTEL_RESOURCE_ATTRIBUTES sets it. Throws config_error naming the variable, quoting the value
/// and saying what is accepted.
std::optional<otlp_trace_options> otlp_trace_options_from(const env_lookup& env,
                                                          std::string host_name);

/// Encodes span exports and sends them, with the metrics pusher's OTLP rules (429, 502, 503,
/// 504 and connection errors retried, honouring Retry-After; any other answer drops the export;
/// a partial success is logged and its rejected spans counted).
class otlp_trace_pusher {
  public:
    /// Throws push_error when the URL is not http(s).
    explicit otlp_trace_pusher(otlp_trace_options o);

    /// Encodes `agents`' spans and queues the body; nothing when none has a span.
    void push(std::span<const otlp_agent_spans> agents);

    const http_pusher& sender() const noexcept { return *sender_; }
    /// Spans receivers said they rejected (partial successes).
    std::uint64_t rejected_spans() const noexcept {
        return rejected_spans_->load(std::memory_order_relaxed);
    }
    const otlp_trace_options& options() const noexcept { return options_; }

  private:
    otlp_trace_options options_;
    std::shared_ptr<std::atomic<std::uint64_t>> rejected_spans_;
    std::unique_ptr<http_pusher> sender_;
};

}  // namespace xtel::push
