#pragma once
/// The process-wide HTTP endpoints that serve /metrics (private to src/).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xtel/exporters/prometheus.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::detail {

class prometheus_agent;
class http_server;

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
    bool attach(std::shared_ptr<const prometheus_agent> agent);
    void detach(const prometheus_agent* agent) noexcept;

    /// The body of a GET /metrics answer.
    std::string render() const;

    /// The same body, shared: rendered again only when some agent published a new snapshot (or
    /// the agents changed) since the last call, so a flood of scrapes costs one rendering per
    /// flush round, and answers being sent share one copy.
    std::shared_ptr<const std::string> render_shared() const;

    /// The address it listens on, with the port the system chose when 0 was asked.
    const host_port& bound() const noexcept;

  private:
    explicit prometheus_endpoint(const host_port& address);

    mutable std::mutex agents_mutex_;
    std::vector<std::shared_ptr<const prometheus_agent>> agents_;

    mutable std::mutex cache_mutex_;
    /// What the cached body was rendered from; held, so that equal pointers mean equal data.
    mutable std::vector<std::shared_ptr<const metrics::snapshot>> cached_from_;
    mutable std::shared_ptr<const std::string> cached_;

    /// Last, so it stops (and no longer calls render_shared) before the rest goes.
    std::unique_ptr<http_server> server_;
};

}  // namespace xtel::detail
