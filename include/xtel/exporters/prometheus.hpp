#pragma once
/// The Prometheus exporter: per-agent metric state served at GET /metrics over HTTP.
///
/// Each agent's metrics are one metric store (xtel/metrics/metric_store.hpp): transfer families
/// from the metrics processor (xtel/metrics/processor.hpp), whose builders
/// NIXL_TELEMETRY_PROMETHEUS_BUILDERS chooses, and the time histograms, both from transfer
/// records; everything else (memory gauges, other events) from the events not derived from
/// transfers.
///
/// The exporter folds each batch into its agent's metric state on the flusher thread and
/// publishes a snapshot after every flush round; the HTTP endpoint renders published snapshots
/// on its own threads. Recording threads never reach any of this, so a scrape cannot block a
/// transfer. Several agents in one process that name the same address share one endpoint;
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

namespace xtel {

namespace metrics {
class builder;
}  // namespace metrics

namespace detail {
class prometheus_agent;
class prometheus_endpoint;
}  // namespace detail

class prometheus_exporter {
  public:
    static constexpr std::string_view name = "prometheus";
    /// What it reads from the environment (and how it takes NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH).
    using settings = prometheus_settings;

    /// Configured from the environment (prometheus_settings::from_env); throws config_error.
    explicit prometheus_exporter(const exporter_context& ctx);
    /// An endpoint that cannot listen (a port that is taken) is logged as an error, not
    /// thrown: the exporter stays inactive and the agent goes on transferring.
    prometheus_exporter(const exporter_context& ctx, const prometheus_settings& settings);
    ~prometheus_exporter();

    prometheus_exporter(const prometheus_exporter&) = delete;
    prometheus_exporter& operator=(const prometheus_exporter&) = delete;

    /// Flusher thread only: the events not derived from transfer records. Events of the names
    /// the pipeline derives from transfers (agent_{tx,rx}_bytes, agent_{tx,rx}_requests_num,
    /// agent_xfer_time, agent_xfer_post_time), recorded by hand, are passed over: their families
    /// are made from the records.
    void export_batch(std::span<const event> batch);
    /// Flusher thread only: whole transfers, each once, through the metrics processor and into
    /// the time histograms.
    void export_transfers(std::span<const transfer_record> transfers, const label_table& labels);
    /// Flusher thread only: the pipeline's exporters, up or off, and the events each lost
    /// (xtel_exporter_up, xtel_exporter_events_lost_total).
    void on_health(std::span<const exporter_health> rows);
    /// Flusher thread only: makes what the batches of this round added visible to scrapes.
    void on_flush_end();

    // The members below are safe to call from any thread.

    /// Adds a user's builder after the configured ones; its families are served beside the
    /// others. Throws metrics::metrics_error when one of its families is invalid or its name
    /// is taken (then the builder is not added).
    void add_builder(std::unique_ptr<metrics::builder> b);

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
    std::shared_ptr<detail::prometheus_agent> agent_;
    std::shared_ptr<detail::prometheus_endpoint> endpoint_;
    std::atomic<std::uint64_t> ignored_{0};
};

}  // namespace xtel
