#pragma once
/// The process-wide HTTP endpoints that serve /metrics (private to src/).

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xtel/exporters/prometheus.hpp"
#include "xtel/http/metrics_body.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::http {
class server;
}  // namespace xtel::http

namespace xtel::metrics {
class agent_metrics;
}  // namespace xtel::metrics

namespace xtel::detail {

/// One listening socket and the agents it serves. Exporters that name the same address share
/// one; it stops listening when the last of them lets go.
class prometheus_endpoint {
  public:
    /// The endpoint for `address`, listening already or started now. Throws exporter_error
    /// naming the address and the reason when it cannot listen.
    static std::shared_ptr<prometheus_endpoint> acquire(const host_port& address);

    ~prometheus_endpoint();

    prometheus_endpoint(const prometheus_endpoint&) = delete;
    prometheus_endpoint& operator=(const prometheus_endpoint&) = delete;

    /// False, and nothing attached, when an agent of the same name is served here already.
    bool attach(std::shared_ptr<const metrics::agent_metrics> agent);
    void detach(const metrics::agent_metrics* agent) noexcept;

    /// The body of a GET /metrics answer in the text format.
    std::string render() const;

    /// The body of a GET /metrics answer in representation `r`, shared: rendered (and
    /// compressed) when first asked for after some agent published a new snapshot (or the
    /// agents changed), so a flood of scrapes costs one rendering per representation asked for
    /// per flush round, and answers being sent share one copy.
    std::shared_ptr<const std::string> render_shared(http::representation r = {}) const;

    /// The address it listens on, with the port the system chose when 0 was asked.
    const host_port& bound() const noexcept;

  private:
    explicit prometheus_endpoint(const host_port& address);

    /// The answer to a GET /metrics in representation `r`: render_shared's body.
    http::entity answer(http::representation r) const;
    /// The agents' latest snapshots, in the order of their names.
    std::vector<std::shared_ptr<const metrics::snapshot>> agent_snapshots() const;

    mutable std::mutex agents_mutex_;
    std::vector<std::shared_ptr<const metrics::agent_metrics>> agents_;

    /// Held across showing the snapshots and taking the body, so that concurrent scrapes share
    /// one rendering.
    mutable std::mutex cache_mutex_;
    /// The agents' snapshots and the process's, and their bodies.
    mutable http::metrics_body body_;
    /// The process metrics (process_metrics.hpp) and when they were read.
    mutable std::shared_ptr<const metrics::snapshot> process_;
    mutable std::chrono::steady_clock::time_point process_read_{};
    /// Whether the families an OpenMetrics body left out were logged (once per endpoint).
    mutable bool warned_left_out_ = false;

    /// Last, so it stops (and no longer calls render_shared) before the rest goes.
    std::unique_ptr<http::server> server_;
};

}  // namespace xtel::detail
