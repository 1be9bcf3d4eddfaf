#pragma once
/// The process-wide HTTP endpoints that serve /metrics (private to src/).

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "xtel/exporters/prometheus.hpp"

namespace httplib {
class Server;
}  // namespace httplib

namespace xtel::detail {

class prometheus_agent;

/// One listening socket and the agents it serves. Exporters that name the same address share
/// one; it stops listening when the last of them lets go.
class prometheus_endpoint {
  public:
    /// The endpoint for `address`, listening already or started now. Throws exporter_error
    /// naming the address and the reason when it cannot listen.
    static std::shared_ptr<prometheus_endpoint> acquire(const prometheus_address& address);

    ~prometheus_endpoint();

    prometheus_endpoint(const prometheus_endpoint&) = delete;
    prometheus_endpoint& operator=(const prometheus_endpoint&) = delete;

    /// False, and nothing attached, when an agent of the same name is served here already.
    bool attach(std::shared_ptr<const prometheus_agent> agent);
    void detach(const prometheus_agent* agent) noexcept;

    /// The body of a GET /metrics answer.
    std::string render() const;

    /// The address it listens on, with the port the system chose when 0 was asked.
    const prometheus_address& bound() const noexcept { return bound_; }

  private:
    explicit prometheus_endpoint(const prometheus_address& address);

    void install_routes();

    std::unique_ptr<httplib::Server> server_;
    prometheus_address bound_;
    std::thread thread_;
    std::atomic<bool> listening_done_{false};

    mutable std::mutex agents_mutex_;
    std::vector<std::shared_ptr<const prometheus_agent>> agents_;
    mutable std::atomic<std::size_t> last_size_{0};
};

}  // namespace xtel::detail
