#pragma once
/// The Prometheus exporter: an agent's metric model (xtel/metrics/agent_metrics.hpp) served at
/// GET /metrics over HTTP.
///
/// It serves the pipeline's one metric model (`metric_state`, xtel/core/exporter.hpp), which the
/// pipeline folds each batch into on the flusher thread and publishes after every flush round,
/// once for every exporter that serves it (the node exporter too). The HTTP endpoint renders
/// published snapshots on its own threads. Recording threads never reach any of this, so a scrape
/// cannot block a transfer. Several agents in one process that name the same address share one
/// endpoint; their series are told apart by the agent_name label.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/exporter.hpp"
#include "xtel/exporters/prometheus_settings.hpp"
#include "xtel/metrics/agent_metrics.hpp"

namespace xtel {

namespace detail {
class prometheus_endpoint;
}  // namespace detail

class prometheus_exporter {
  public:
    static constexpr std::string_view name = "prometheus";
    /// What it reads from the environment (and how it takes NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH).
    using settings = prometheus_settings;
    /// What it serves: the pipeline's one model of the agent's metrics.
    using metric_state = metrics::agent_metrics;

    /// As the pipeline builds it: serving the pipeline's model, which the pipeline folds and
    /// publishes; configured by `settings`, else from the environment
    /// (prometheus_settings::from_env, which throws config_error). An endpoint that cannot
    /// listen (a port that is taken) is logged as an error, not thrown: the exporter stays
    /// inactive and the agent goes on transferring.
    explicit prometheus_exporter(const metric_state_context<metric_state>& m,
                                 const std::optional<prometheus_settings>& settings = std::nullopt);
    ~prometheus_exporter();

    prometheus_exporter(const prometheus_exporter&) = delete;
    prometheus_exporter& operator=(const prometheus_exporter&) = delete;

    // The members below are safe to call from any thread.

    /// The model it serves; in a pipeline, the pipeline's (telemetry::metric_state()), where
    /// a user's builder is added (metrics::agent_metrics::add_builder).
    metric_state& model() noexcept { return *model_; }

    /// False when the endpoint could not listen or the agent name is already served there.
    bool active() const noexcept { return endpoint_ != nullptr; }
    /// The port the endpoint listens on (the chosen one when 0 was asked); 0 when inactive.
    std::uint16_t port() const noexcept;
    /// host:port the endpoint listens on; empty when inactive.
    std::string address() const;
    /// What GET /metrics answers now (every agent on the endpoint); empty when inactive.
    std::string scrape() const;
    /// The exporter contract's name for an inactive one (xtel/core/exporter.hpp), which
    /// stats() and the health rows read; the pipeline counts the events it loses meanwhile.
    bool disabled() const noexcept { return !active(); }

  private:
    std::shared_ptr<metric_state> model_;
    std::shared_ptr<detail::prometheus_endpoint> endpoint_;
};

}  // namespace xtel
