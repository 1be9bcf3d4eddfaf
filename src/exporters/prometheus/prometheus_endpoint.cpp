#include "exporters/prometheus/prometheus_endpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/log.hpp"
#include "xtel/http/negotiate.hpp"
#include "xtel/http/request.hpp"
#include "xtel/http/server.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/process_metrics.hpp"

namespace xtel::detail {

namespace {

constexpr std::string_view metrics_path = "/metrics";
/// What the representation of /metrics is chosen by (negotiate.hpp), for caches between.
constexpr std::string_view varies_by = "Accept, Accept-Encoding";

struct endpoint_registry {
    std::mutex mutex;
    std::map<std::string, std::weak_ptr<prometheus_endpoint>, std::less<>> by_address;
};

endpoint_registry& registry() {
    static endpoint_registry r;
    return r;
}

}  // namespace

std::shared_ptr<prometheus_endpoint> prometheus_endpoint::acquire(const host_port& address) {
    auto& r = registry();
    const std::string key = address.to_string();
    const std::lock_guard lock(r.mutex);
    if (const auto it = r.by_address.find(key); it != r.by_address.end()) {
        if (auto existing = it->second.lock()) {
            return existing;
        }
    }
    // The deleter stops the server under the registry lock, so an exporter that asks for the
    // same address right after finds the port free again rather than still bound.
    std::shared_ptr<prometheus_endpoint> endpoint(
        new prometheus_endpoint(address), [key](prometheus_endpoint* e) {
            auto& reg = registry();
            const std::lock_guard relock(reg.mutex);
            if (const auto it = reg.by_address.find(key);
                it != reg.by_address.end() && it->second.expired()) {
                reg.by_address.erase(it);
            }
            delete e;
        });
    r.by_address[key] = endpoint;
    return endpoint;
}

prometheus_endpoint::prometheus_endpoint(const host_port& address)
    : body_(http::metrics_body::default_gzip_level,
            [this](std::size_t left_out) {
                // Each agent's store refuses such families; agents of one process can still
                // make them between them (their own events' names). cache_mutex_ is held.
                if (!warned_left_out_) {
                    warned_left_out_ = true;
                    xtel::detail::log(log_level::warning,
                                      "prometheus: {} families of this process's agents are left "
                                      "out of OpenMetrics scrapes: their names clash there with "
                                      "another agent's families (the text format serves them)",
                                      left_out);
                }
            }),
      server_(std::make_unique<http::server>(
          address,
          std::string(metrics_path),
          std::string(varies_by),
          [this](const http::request_head& head) { return answer(http::negotiate(head)); })) {
    if (address.port == 0) {
        detail::log(log_level::info, "prometheus: serving http://{}{} (port {} chosen for {})",
                    bound().to_string(), metrics_path, bound().port, address.to_string());
    } else {
        detail::log(log_level::info, "prometheus: serving http://{}{}", bound().to_string(),
                    metrics_path);
    }
}

prometheus_endpoint::~prometheus_endpoint() = default;

const host_port& prometheus_endpoint::bound() const noexcept {
    return server_->bound();
}

bool prometheus_endpoint::attach(std::shared_ptr<const metrics::agent_metrics> agent) {
    const std::lock_guard lock(agents_mutex_);
    const bool taken = std::any_of(agents_.begin(), agents_.end(), [&](const auto& a) {
        return a->agent_name() == agent->agent_name();
    });
    if (taken) {
        return false;
    }
    agents_.push_back(std::move(agent));
    return true;
}

void prometheus_endpoint::detach(const metrics::agent_metrics* agent) noexcept {
    const std::lock_guard lock(agents_mutex_);
    std::erase_if(agents_, [agent](const auto& a) { return a.get() == agent; });
}

std::string prometheus_endpoint::render() const {
    return *render_shared();
}

std::shared_ptr<const std::string> prometheus_endpoint::render_shared(
    http::representation r) const {
    return answer(r).body;
}

std::vector<std::shared_ptr<const metrics::snapshot>> prometheus_endpoint::agent_snapshots() const {
    // Agents in the order of their names, so every scrape lists their series alike.
    const std::lock_guard lock(agents_mutex_);
    std::vector<const metrics::agent_metrics*> agents;
    agents.reserve(agents_.size());
    for (const auto& a : agents_) {
        agents.push_back(a.get());
    }
    std::sort(agents.begin(), agents.end(),
              [](const auto* a, const auto* b) { return a->agent_name() < b->agent_name(); });
    std::vector<std::shared_ptr<const metrics::snapshot>> snapshots;
    snapshots.reserve(agents.size() + 1);
    for (const auto* a : agents) {
        snapshots.push_back(a->latest());
    }
    return snapshots;
}

http::entity prometheus_endpoint::answer(http::representation r) const {
    auto snapshots = agent_snapshots();
    const std::lock_guard lock(cache_mutex_);
    // The process's own metrics, once per endpoint: read again at most once a second, so a
    // flood of scrapes still costs one rendering per representation and second.
    if (const auto now = std::chrono::steady_clock::now();
        !process_ || now - process_read_ >= std::chrono::seconds(1)) {
        process_ = std::make_shared<const metrics::snapshot>(metrics::process_snapshot());
        process_read_ = now;
    }
    snapshots.push_back(process_);
    body_.show(std::move(snapshots));
    return body_.answer(r);
}

}  // namespace xtel::detail
