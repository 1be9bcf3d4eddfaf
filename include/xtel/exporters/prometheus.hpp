#pragma once
/// The Prometheus exporter: an agent's metric state (xtel/metrics/agent_metrics.hpp) served at
/// GET /metrics over HTTP.
///
/// In a pipeline it serves the pipeline's one metric state (`metric_state`, xtel/core/
/// exporter.hpp), which the pipeline folds each batch into on the flusher thread and publishes
/// after every flush round, once for every exporter that serves it (the node exporter too);
/// built on its own, it folds into a model of its own. The HTTP endpoint renders published
/// snapshots on its own threads. Recording threads never reach any of this, so a scrape cannot
/// block a transfer. Several agents in one process that name the same address share one endpoint;
/// their series are told apart by the agent_name label.

#include <atomic>
#include <cstdint>
#include <memory>
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

    /// On its own, with a model of its own; both configured from the environment
    /// (prometheus_settings::from_env, metrics::agent_metrics_settings::from_env); throws
    /// config_error.
    explicit prometheus_exporter(const exporter_context& ctx);
    /// As the pipeline builds it: serving the pipeline's model, which the pipeline folds.
    explicit prometheus_exporter(const metric_state_context<metric_state>& m);
    /// On its own, with a model of its own. An endpoint that cannot listen (a port that is
    /// taken) is logged as an error, not thrown: the exporter stays inactive and the agent goes
    /// on transferring.
    prometheus_exporter(const exporter_context& ctx,
                        const prometheus_settings& settings,
                        const metrics::agent_metrics_settings& model);
    prometheus_exporter(const metric_state_context<metric_state>& m,
                        const prometheus_settings& settings);
    ~prometheus_exporter();

    prometheus_exporter(const prometheus_exporter&) = delete;
    prometheus_exporter& operator=(const prometheus_exporter&) = delete;

    /// Flusher thread only: the events not derived from transfer records, folded when the
    /// model is its own (the pipeline folds its model itself). Events of the names the pipeline
    /// derives from transfers (agent_{tx,rx}_bytes, agent_{tx,rx}_requests_num,
    /// agent_xfer_time, agent_xfer_post_time), recorded by hand, are passed over: their
    /// families are made from the records.
    void export_batch(std::span<const event> batch);
    /// Flusher thread only: whole transfers, each once, through the metrics processor and into
    /// the time histograms (of its own model; counted only when inactive).
    void export_transfers(std::span<const transfer_record> transfers, const label_table& labels);
    /// Flusher thread only: the pipeline's exporters, up or off, and the events each lost
    /// (xtel_telemetry_exporter_up, xtel_telemetry_exporter_events_lost_total), folded into its own
    /// model.
    void on_health(std::span<const exporter_health> rows);
    /// Flusher thread only: makes what the batches of this round added visible to scrapes
    /// (publishes its own model; the pipeline publishes its model itself).
    void on_flush_end();

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
    /// Events handed to an inactive exporter, with the events of the transfer records handed
    /// to it (as many as the pipeline makes of them for event exporters).
    std::uint64_t events_ignored() const noexcept {
        return ignored_.load(std::memory_order_relaxed);
    }
    /// The exporter contract's names for the two above (xtel/core/exporter.hpp), which stats()
    /// reads.
    bool disabled() const noexcept { return !active(); }
    std::uint64_t events_lost() const noexcept { return events_ignored(); }

  private:
    prometheus_exporter(const exporter_context& ctx,
                        const prometheus_settings& settings,
                        std::shared_ptr<metric_state> model,
                        bool folds);

    std::shared_ptr<metric_state> model_;
    /// Whether the model is its own, which it folds and publishes itself.
    bool folds_ = false;
    std::shared_ptr<detail::prometheus_endpoint> endpoint_;
    std::atomic<std::uint64_t> ignored_{0};
};

}  // namespace xtel
