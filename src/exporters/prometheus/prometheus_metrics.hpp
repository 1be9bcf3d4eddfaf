#pragma once
/// The Prometheus exporter's metric state and its text rendering (private to src/).

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/event.hpp"
#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"
#include "xtel/metrics/processor.hpp"
#include "xtel/transfer_record.hpp"

namespace xtel::detail {

enum class family_type : std::uint8_t { counter, gauge, histogram, summary };

/// What a family is called and how it is shown. Immutable once created.
struct family_desc {
    std::string name;  ///< exposition name, with _total for counters
    std::string help;  ///< escaped for a HELP line
    family_type type;
    std::uint8_t decimals = 0;  ///< values are shown divided by 10^decimals (metric_store.hpp)
};

/// One series of a family whose series vary by labels (the metrics processor's families).
struct labelled_value {
    const std::string* labels;  ///< `,name="value"...`, escaped; empty for no labels
    std::uint64_t value;
};

/// One agent's series of one family.
struct family_values {
    const family_desc* desc = nullptr;
    std::uint64_t value = 0;  ///< counter, gauge
    std::uint64_t sum = 0;    ///< histogram, summary
    std::uint64_t count = 0;  ///< histogram, summary
    /// Histogram only: observations per bucket, not cumulative (the +Inf bucket is `count`).
    std::vector<std::uint64_t> buckets;
    /// A processor family: its series are `series`, not `value`.
    bool labelled = false;
    std::vector<labelled_value> series;
};

/// Histogram bounds and their `le` label values, shared by an agent and its snapshots.
struct bucket_layout {
    std::vector<double> bounds;
    std::vector<std::string> le;
};

/// Family descriptions and rendered label sets, only ever appended to; snapshots hold it so
/// their pointers stay valid.
struct family_table {
    std::deque<family_desc> descs;
    std::deque<std::string> labels;
};

/// What a scrape renders for one agent: immutable once published.
struct agent_snapshot {
    std::string agent_name;
    std::string labels;  ///< `agent_name="...",hostname="..."`, escaped
    std::shared_ptr<const bucket_layout> layout;
    std::shared_ptr<const family_table> table;
    std::vector<family_values> families;  ///< sorted by exposition name
};

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

    void apply(std::span<const event> batch);
    void apply_transfers(std::span<const transfer_record> transfers, const label_table& labels);
    void add_builder(std::unique_ptr<metrics::builder> b);
    /// Publishes the state as a new snapshot when a batch changed it since the last call.
    void publish();
    std::shared_ptr<const agent_snapshot> snapshot() const;

    const std::string& agent_name() const noexcept { return agent_name_; }

  private:
    static constexpr std::uint32_t rejected = UINT32_MAX;
    /// In sample_names_: a name a processor family uses.
    static constexpr std::uint32_t processor_owned = UINT32_MAX - 1;

    /// A processor family as scrapes see it: its description and each series' labels.
    struct processor_family {
        const family_desc* desc = nullptr;
        std::vector<const std::string*> labels;
    };

    void apply_one(const event& e);
    std::uint32_t find_or_add(const event& e);
    std::uint32_t add_family(std::string name, std::string help, family_type type, bool listed);
    /// The processor's check on each new family: refuses a name this agent's families use.
    void reserve_name(const metrics::family_spec& spec);
    /// Catches up with the families and series the processor made since the last call.
    void sync_processor_families();
    bool names_free(const std::string& name, family_type type) const;
    void ignore() noexcept;

    const std::string agent_name_;
    const std::string labels_;
    const std::shared_ptr<const bucket_layout> layout_;

    // Flusher state.
    std::shared_ptr<family_table> table_;
    std::vector<family_values> values_;  ///< by family index
    std::vector<std::uint32_t> order_;   ///< family indices sorted by exposition name
    std::map<std::string, std::uint32_t, std::less<>> dynamic_;  ///< event name -> index
    /// Every name a line or a HELP/TYPE line of this agent uses -> the family that uses it.
    std::map<std::string, std::uint32_t, std::less<>> sample_names_;
    std::size_t dynamic_count_ = 0;
    bool dirty_ = true;
    std::unique_ptr<transfer_processor> processor_;
    std::vector<processor_family> processor_families_;  ///< by store family index
    std::vector<std::uint32_t> processor_order_;        ///< store family indices sorted by name

    std::mutex state_mutex_;

    mutable std::mutex published_mutex_;
    std::shared_ptr<const agent_snapshot> published_;
};

/// Escapes a label value: backslash, double quote and line feed.
std::string escape_label_value(std::string_view value);
/// Escapes HELP text: backslash and line feed.
std::string escape_help(std::string_view text);
/// Maps an event name onto the metric name alphabet [a-zA-Z0-9_:], not starting with a digit.
std::string sanitize_metric_name(std::string_view name);

/// Renders agents in the text exposition format (version 0.0.4): each family once with its
/// HELP and TYPE, then every agent's series of it. An agent whose family of the same name has
/// another type is left out of that family.
void render(std::span<const std::shared_ptr<const agent_snapshot>> agents, std::string& out);

}  // namespace xtel::detail
