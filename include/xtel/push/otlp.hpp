#pragma once
/// The OTLP/HTTP metrics client of xtel-exporter: the node's merged metric
/// snapshots as one ExportMetricsServiceRequest, in either encoding OTLP/HTTP defines (binary
/// protobuf or OTLP's JSON), with cumulative or delta temporality; sent by http_pusher.
/// docs/otlp.md has the mapping, family by family; src/push/otlp/ the parts, one concern a file
/// (the encoder, the conversion of each kind of point, attributes and resources, the
/// temporality selector, the JSON writer, the response reader, the pusher).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xtel/metrics/snapshot.hpp"
#include "xtel/push/http_pusher.hpp"

namespace xtel::push {

enum class otlp_encoding { protobuf, json };
enum class otlp_temporality { cumulative, delta };

/// What every resource says about where it runs and what it is.
struct otlp_resource {
    /// service.name of the agents' resources (the exporter's own is "xtel-exporter").
    std::string service_name = "xtel";
    /// host.name of every resource.
    std::string host_name;
    /// Added to every resource (OTEL_RESOURCE_ATTRIBUTES), before the attributes xtel knows
    /// as facts (process.pid, the agent's), which replace any of the same key.
    std::vector<metrics::label> attributes;
};

/// Turns snapshots into request bodies. Keeps, for delta temporality, each series' value at
/// the last encode: one encoder per destination, used from one thread.
///
/// Resources: one per snapshot that has labels (an agent's: agent_name, rank, local_rank, pid),
/// and one for the snapshots without labels (xtel-exporter's own health and process metrics).
class otlp_encoder {
  public:
    otlp_encoder(otlp_resource resource, otlp_temporality temporality);
    ~otlp_encoder();

    otlp_encoder(const otlp_encoder&) = delete;
    otlp_encoder& operator=(const otlp_encoder&) = delete;

    /// The body (not compressed) of one export of `snapshots` at `now_ns` (ns since the
    /// epoch). With delta temporality, each counter and histogram series carries what it
    /// gained since the previous encode (from its start, the first time and after its
    /// producer restarted), and the state moves on: encode each export once.
    std::string encode(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
                       std::uint64_t now_ns,
                       otlp_encoding encoding);

    /// Series whose previous values are kept (delta temporality).
    std::size_t tracked_series() const noexcept;

  private:
    /// The resource, the temporality selector (src/push/otlp/temporality.hpp), scratch.
    struct state;
    std::unique_ptr<state> state_;
};

/// Where and how xtel-exporter sends OTLP: OTEL_EXPORTER_OTLP_* and OTEL_* variables, then
/// xtel-exporter's flags (otlp_config.cpp).
struct otlp_options {
    /// The full URL POSTed to (<endpoint>/v1/metrics).
    std::string url;
    otlp_encoding encoding = otlp_encoding::protobuf;
    otlp_temporality temporality = otlp_temporality::cumulative;
    bool gzip = false;
    /// Extra headers, name and value.
    std::vector<std::pair<std::string, std::string>> headers;
    std::chrono::milliseconds timeout{10'000};
    std::chrono::milliseconds interval{60'000};
    otlp_resource resource;
    std::size_t queue_capacity = 64;
};

/// Encodes exports and sends them (an http_pusher with OTLP's headers and rules: 429, 502,
/// 503 and 504 and connection errors are retried, honouring Retry-After; any other answer
/// drops the export; a partial success is logged and its rejected points counted).
class otlp_pusher {
  public:
    /// Throws push_error when the URL is not http(s).
    explicit otlp_pusher(otlp_options o);

    /// Encodes `snapshots` at `now_ns` and queues the body.
    void push(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
              std::uint64_t now_ns);

    const http_pusher& sender() const noexcept { return *sender_; }
    /// Points receivers said they rejected (partial successes).
    std::uint64_t rejected_points() const noexcept {
        return rejected_points_->load(std::memory_order_relaxed);
    }
    const otlp_options& options() const noexcept { return options_; }

  private:
    otlp_options options_;
    otlp_encoder encoder_;
    std::shared_ptr<std::atomic<std::uint64_t>> rejected_points_;
    std::unique_ptr<http_pusher> sender_;
};

/// What a 2xx answer's body says of a partial success: the points (or, answering a traces
/// export, the spans) rejected and the message
/// (its first 512 bytes, control characters as '?'); nullopt when it says nothing (an empty
/// answer, no partial success) or cannot be read.
struct otlp_partial_success {
    std::int64_t rejected_data_points = 0;
    std::string error_message;
};
std::optional<otlp_partial_success> parse_otlp_response(std::string_view body,
                                                        std::string_view content_type);

}  // namespace xtel::push
