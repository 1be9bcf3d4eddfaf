#pragma once
/// One agent's metrics in the Prometheus exporter (private to src/): the metric store its
/// producers fill (the processor's builders from transfer records, the time histograms, the
/// event families) and the snapshot it publishes for scrapes.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/event.hpp"
#include "xtel/core/exporter.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"
#include "xtel/metrics/processor.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::detail {

/// Who shows the agent's process id. The agent's own /metrics shows it as xtel_agent_info's
/// `pid` label. A node file's reader adds the writer's pid to every series it serves
/// (xtel-exporter), so there the agent leaves it out and reserves the names readers add
/// (metrics::reserved_label_names: decode_snapshot refuses a family that uses one).
enum class pid_shown_by : bool { agent, reader };

/// One agent's metrics, in two sets (docs/metrics.md): the NIXL set, with the names, types,
/// units and labels upstream NIXL serves, and the xtel set, in base units with the variation
/// in labels. apply(), apply_transfers(), apply_health() and publish() run on that agent's
/// flusher thread; add_builder() on any thread (state_mutex_, uncontended otherwise, orders
/// them); snapshot() on any thread, under a lock held for a pointer copy.
class prometheus_agent {
  public:
    /// The builders the exporter can run; `builders` names which.
    using transfer_processor = metrics::
        processor<metrics::legacy_builder, metrics::comprehensive_builder, metrics::time_builder>;

    /// `bounds`: the latency histograms' bucket bounds in microseconds. Every series carries
    /// agent_name, then rank and local_rank when `rank` has them. Throws
    /// metrics::metrics_error for a builder name the processor lacks.
    prometheus_agent(std::string agent_name,
                     std::string_view hostname,
                     std::vector<double> bounds,
                     const std::vector<std::string>& builders = {"legacy", "comprehensive", "time"},
                     std::size_t max_series = metrics::metric_store::default_max_series,
                     const process_rank& rank = {},
                     pid_shown_by pid = pid_shown_by::agent);

    prometheus_agent(const prometheus_agent&) = delete;
    prometheus_agent& operator=(const prometheus_agent&) = delete;

    /// Folds events that were not derived from transfer records (memory, errors, connections,
    /// the dropped-events counter...) into their families.
    void apply(std::span<const event> batch);
    /// Transfer records, each once: the processor's builders, and the latency histograms and
    /// last-request gauges from the completed ones.
    void apply_transfers(std::span<const transfer_record> transfers, const label_table& labels);
    /// The pipeline's exporters: up or disabled, and the events each lost.
    void apply_health(std::span<const exporter_health> rows);
    void add_builder(std::unique_ptr<metrics::builder> b);
    /// Publishes the store as a new snapshot when it changed since the last call.
    void publish();
    std::shared_ptr<const metrics::snapshot> snapshot() const;

    const std::string& agent_name() const noexcept { return agent_name_; }

    /// The `status` label upstream NIXL's agent_errors_total gives each of its error kinds, in
    /// its order.
    static constexpr std::string_view nixl_error_statuses[] = {
        "not_posted",    "invalid_param",     "backend",       "not_found",
        "mismatch",      "not_allowed",       "repost_active", "unknown",
        "not_supported", "remote_disconnect", "canceled",      "no_telemetry"};
    /// The NIXL status an xtel error kind is counted under.
    static std::string_view nixl_status_of(status_code code) noexcept;

  private:
    /// A family for events of a name the agent does not know (a user's own events).
    struct event_family {
        metrics::series_ref series;
        metrics::metric_type type = metrics::metric_type::counter;
    };
    static constexpr std::uint32_t rejected = UINT32_MAX;

    void apply_one(const event& e);
    /// Handles an event of a name this agent knows; false when the name is not one.
    bool apply_known(const event& e);
    void apply_memory(const event& e, bool registered);
    /// The index in events_ of the family `e` goes to, or rejected.
    std::uint32_t find_or_add(const event& e);
    /// Adds one of this agent's own families; its lines are reserved.
    metrics::family_id add_own(metrics::family_spec spec);
    /// add_own, and the series of `values`, made now (at 0).
    metrics::series_ref add_own_series(metrics::family_spec spec,
                                       std::initializer_list<std::string_view> values);
    /// The store's check on each new family: refuses a name this agent's own families use.
    void reserve_name(const metrics::family_spec& spec) const;
    void ignore();
    const std::string& peer_name(label_id id, const label_table& labels);

    const std::string agent_name_;
    const std::string hostname_;
    const std::vector<metrics::label> labels_;

    // Flusher state.
    std::unique_ptr<transfer_processor> processor_;
    // The NIXL set.
    metrics::series_ref xfer_time_us_, post_time_us_;        // histograms
    metrics::series_ref xfer_time_total_, post_time_total_;  // counters, µs
    metrics::series_ref xfer_time_last_, post_time_last_;    // gauges, µs
    metrics::series_ref tx_last_bytes_, rx_last_bytes_;
    metrics::series_ref mem_registered_total_, mem_deregistered_total_;
    metrics::series_ref mem_registered_last_, mem_deregistered_last_;
    metrics::series_ref nixl_dropped_;
    std::vector<metrics::series_ref> nixl_errors_;  // by nixl_error_statuses index
    // The xtel set.
    metrics::family_id duration_ = 0, post_duration_ = 0;  // {op, peer} histograms, seconds
    std::vector<metrics::series_ref> errors_;              // by status_code
    metrics::series_ref mem_bytes_, registrations_, deregistrations_;
    metrics::series_ref dropped_, export_errors_, ignored_;
    metrics::series_ref connections_, opened_, closed_, endpoint_errors_;
    metrics::family_id lanes_ = 0, exporter_up_ = 0, exporter_lost_ = 0;
    // What the memory events said last: bytes registered now, deregistered since the start.
    std::uint64_t registered_now_ = 0;
    std::uint64_t deregistered_sum_ = 0;
    std::vector<std::string> peers_;  // label id -> name, filled as ids are met
    std::vector<event_family> events_;
    std::map<std::string, std::uint32_t, std::less<>> dynamic_;  ///< event name -> events_ index
    /// Every line name (name, name_sum...) of this agent's own families.
    std::set<std::string, std::less<>> own_lines_;
    std::uint64_t published_changes_ = 0;
    bool published_once_ = false;

    std::mutex state_mutex_;

    mutable std::mutex published_mutex_;
    std::shared_ptr<const metrics::snapshot> published_;
};

/// Maps an event name onto the metric name alphabet [a-zA-Z0-9_:], not starting with a digit.
std::string sanitize_metric_name(std::string_view name);

}  // namespace xtel::detail
