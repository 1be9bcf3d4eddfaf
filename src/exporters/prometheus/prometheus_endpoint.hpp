#pragma once
/// The process-wide HTTP endpoints that serve /metrics (private to src/).

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xtel/exporters/prometheus.hpp"
#include "xtel/metrics/negotiate.hpp"
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

    /// gzip level of compressed answers: 1, the fastest, since the body is rendered again
    /// every flush round; docs/performance.md has what it costs and saves next to level 6.
    static constexpr int gzip_level = 1;

    /// The body of a GET /metrics answer in the text format.
    std::string render() const;

    /// The body of a GET /metrics answer in representation `r`, shared: rendered (and
    /// compressed) when first asked for after some agent published a new snapshot (or the
    /// agents changed), so a flood of scrapes costs one rendering per representation asked for
    /// per flush round, and answers being sent share one copy.
    std::shared_ptr<const std::string> render_shared(metrics::representation r = {}) const;

    /// The address it listens on, with the port the system chose when 0 was asked.
    const host_port& bound() const noexcept;

  private:
    explicit prometheus_endpoint(const host_port& address);

    /// cached_[index_of(r)], rendered first when null; cache_mutex_ held.
    const std::shared_ptr<const std::string>& cached(metrics::representation r) const;

    mutable std::mutex agents_mutex_;
    std::vector<std::shared_ptr<const metrics::agent_metrics>> agents_;

    mutable std::mutex cache_mutex_;
    /// What the cached bodies were rendered from; held, so that equal pointers mean equal data.
    mutable std::vector<std::shared_ptr<const metrics::snapshot>> cached_from_;
    /// By index_of(representation); null: not rendered since cached_from_ changed.
    mutable std::array<std::shared_ptr<const std::string>, metrics::representation_count> cached_;
    /// The process metrics (process_metrics.hpp) and when they were read.
    mutable std::shared_ptr<const metrics::snapshot> process_;
    mutable std::chrono::steady_clock::time_point process_read_{};
    /// The size each representation last had, to reserve for the next rendering.
    mutable std::array<std::size_t, metrics::representation_count> last_size_{};
    /// Whether the families an OpenMetrics body left out were logged (once per endpoint).
    mutable bool warned_left_out_ = false;

    /// Last, so it stops (and no longer calls render_shared) before the rest goes.
    std::unique_ptr<http::server> server_;
};

}  // namespace xtel::detail
