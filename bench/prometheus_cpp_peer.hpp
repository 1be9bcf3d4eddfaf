#pragma once
// The real peer of the harness (issue 46): prometheus-cpp (Debian's prometheus-cpp-dev), the
// library NIXL's Prometheus exporter is built on, recording what an agent records per transfer.
// peer_bench.cpp measures it against xtel's pipelines, nixl_flush_bench.cpp against xtel's NIXL
// plug-in.

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>

#include "xtel/metrics/agent_metrics_settings.hpp"

namespace xtel_bench {

/// An agent that records its transfers with prometheus-cpp, as NIXL's Prometheus exporter
/// does for the four events of a transfer: the tx bytes and tx requests counters incremented
/// and the transfer and post time histograms observed, in microseconds over xtel's (and
/// upstream NIXL's) default bounds, 18 from 10 us to 10 s. Each family has one series, labelled
/// as NIXL labels its series (hostname, agent name), and its handle is looked up once, here:
/// per transfer the library does its own work and no registry lookup. NIXL's exporter also
/// sets a last-value gauge beside the bytes and time counters and keeps a counter of each
/// time; those are left out, so that the peer does what xtel's model does per transfer.
class prometheus_cpp_agent {
  public:
    prometheus_cpp_agent()
        : registry_(std::make_shared<prometheus::Registry>()),
          bytes_(prometheus::BuildCounter()
                     .Name("agent_tx_bytes_total")
                     .Help("Bytes this agent sent")
                     .Register(*registry_)
                     .Add(labels())),
          requests_(prometheus::BuildCounter()
                        .Name("agent_tx_requests_num_total")
                        .Help("Requests this agent sent")
                        .Register(*registry_)
                        .Add(labels())),
          xfer_time_(prometheus::BuildHistogram()
                         .Name("agent_xfer_time_us")
                         .Help("Microseconds from post to completion")
                         .Register(*registry_)
                         .Add(labels(), bounds())),
          post_time_(prometheus::BuildHistogram()
                         .Name("agent_xfer_post_time_us")
                         .Help("Microseconds in the post call")
                         .Register(*registry_)
                         .Add(labels(), bounds())) {}

    /// What the agent records after one transfer: the values record_one_transfer gives xtel.
    [[gnu::always_inline]] void record(std::uint64_t i) {
        add_bytes(65536);
        add_requests(1);
        observe_xfer_time(static_cast<double>(i & 63));
        observe_post_time(static_cast<double>(i & 7));
    }

    // Each of the four updates alone, as an exporter that gets a transfer's values one event
    // at a time makes them (nixl_flush_bench.cpp).
    [[gnu::always_inline]] void add_bytes(double v) { bytes_.Increment(v); }
    [[gnu::always_inline]] void add_requests(double v) { requests_.Increment(v); }
    [[gnu::always_inline]] void observe_xfer_time(double us) { xfer_time_.Observe(us); }
    [[gnu::always_inline]] void observe_post_time(double us) { post_time_.Observe(us); }

    /// The requests counted: every transfer recorded adds one.
    double requests() const { return requests_.Value(); }

  private:
    static prometheus::Labels labels() {
        return {{"hostname", "bench-host"}, {"agent_name", "bench"}};
    }
    static prometheus::Histogram::BucketBoundaries bounds() {
        return xtel::metrics::agent_metrics_settings::default_buckets();
    }

    std::shared_ptr<prometheus::Registry> registry_;
    prometheus::Counter& bytes_;
    prometheus::Counter& requests_;
    prometheus::Histogram& xfer_time_;
    prometheus::Histogram& post_time_;
};

}  // namespace xtel_bench
