#pragma once
/// One agent's metrics in the Prometheus exporter (private to src/): the metric store its
/// producers fill (the processor's builders from transfer records, the time histograms, the
/// event families) and the snapshot it publishes for scrapes.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/event.hpp"
#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"
#include "xtel/metrics/processor.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/transfer_record.hpp"

namespace xtel::detail {

/// One agent's metrics. apply(), apply_transfers() and publish() run on that agent's flusher
/// thread; add_builder() on any thread (state_mutex_, uncontended otherwise, orders them);
/// snapshot() on any thread, under a lock held for a pointer copy.
class prometheus_agent {
  public:
    /// The builders the exporter can run; `builders` names which.
    using transfer_processor = metrics::
        processor<metrics::legacy_builder, metrics::comprehensive_builder, metrics::time_builder>;

    /// Throws metrics::metrics_error for a builder name the processor lacks.
    prometheus_agent(std::string agent_name,
                     std::string_view hostname,
                     std::vector<double> bounds,
                     const std::vector<std::string>& builders = {"legacy", "comprehensive", "time"},
                     std::size_t max_series = metrics::metric_store::default_max_series);

    prometheus_agent(const prometheus_agent&) = delete;
    prometheus_agent& operator=(const prometheus_agent&) = delete;

    /// Folds events that were not derived from transfer records (memory, errors, backend, the
    /// dropped-events counter...) into the event families.
    void apply(std::span<const event> batch);
    /// Transfer records, each once: the processor's builders, and the time histograms from the
    /// timed, completed ones.
    void apply_transfers(std::span<const transfer_record> transfers, const label_table& labels);
    void add_builder(std::unique_ptr<metrics::builder> b);
    /// Publishes the store as a new snapshot when it changed since the last call.
    void publish();
    std::shared_ptr<const metrics::snapshot> snapshot() const;

    const std::string& agent_name() const noexcept { return agent_name_; }

  private:
    /// An event family of this agent: where its events go, and whether it is built in (built-in
    /// families take more value kinds, see apply_one).
    struct event_family {
        metrics::series_ref series;
        metrics::metric_type type = metrics::metric_type::counter;
        bool builtin = false;
    };
    static constexpr std::uint32_t rejected = UINT32_MAX;
    /// An event derived from transfer records: neither folded nor counted as ignored.
    static constexpr std::uint32_t passed_over = UINT32_MAX - 1;

    void apply_one(const event& e);
    /// The index in events_ of the family `e` goes to, or rejected, or passed_over.
    std::uint32_t find_or_add(const event& e);
    /// Adds one of this agent's own families, with its one unlabelled series.
    metrics::series_ref add_own(metrics::family_spec spec);
    /// The store's check on each new family: refuses a name this agent's own families use.
    void reserve_name(const metrics::family_spec& spec) const;
    void ignore();

    const std::string agent_name_;
    const std::vector<metrics::label> labels_;

    // Flusher state.
    std::unique_ptr<transfer_processor> processor_;
    metrics::series_ref xfer_time_;
    metrics::series_ref post_time_;
    metrics::series_ref ignored_;
    std::vector<event_family> events_;  ///< the built-in ones first, in the order of the table
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
