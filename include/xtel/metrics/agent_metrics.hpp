#pragma once
/// One agent's metric model: the metric store its producers fill (the processor's builders from
/// transfer records, the time histograms, the event families, the pipeline's health) and the
/// snapshot it publishes. The pipeline owns one per agent when some exporter serves it
/// (`using metric_state = agent_metrics;`, xtel/core/exporter.hpp) and folds into it
/// once, on its flusher thread, whichever exporters serve it (prometheus, node).

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
#include "xtel/metrics/agent_metrics_settings.hpp"
#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"
#include "xtel/metrics/processor.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics {

/// One agent's metrics, in two sets (docs/metrics.md): the NIXL set, with the names, types,
/// units and labels upstream NIXL serves, and the xtel set, in base units with the variation
/// in labels. apply(), apply_transfers(), apply_health() and publish() run on that agent's
/// flusher thread; add_builder() on any thread (state_mutex_, uncontended otherwise, orders
/// them); latest() on any thread, under a lock held for a pointer copy.
class agent_metrics {
  public:
    /// The builders the model can run; agent_metrics_settings::builders names which.
    using transfer_processor = processor<legacy_builder, comprehensive_builder, time_builder>;

    /// Every series carries agent_name, then rank and local_rank when `settings.rank` has
    /// them; xtel_agent_info carries the process id. Throws metrics_error for a builder name
    /// the processor lacks.
    agent_metrics(std::string agent_name, const agent_metrics_settings& settings);
    /// Configured from the environment (agent_metrics_settings::from_env), as the pipeline
    /// builds it; throws config_error.
    explicit agent_metrics(const exporter_context& ctx);

    agent_metrics(const agent_metrics&) = delete;
    agent_metrics& operator=(const agent_metrics&) = delete;

    /// Folds events that were not derived from transfer records (memory, errors, connections,
    /// the dropped-events counter...) into their families.
    void apply(std::span<const event> batch);
    /// Transfer records, each once: the processor's builders, and the latency histograms and
    /// last-request gauges from the completed ones. Records marked notified (transfers other
    /// agents made into this one) go to xtel_notified_transfers_total and
    /// xtel_notified_bytes_total only. `traces` (by index into `transfers`, ascending) are the
    /// traces and spans the back end's span stage found for them: the latency exemplars carry
    /// their ids.
    void apply_transfers(std::span<const transfer_record> transfers,
                         const label_table& labels,
                         std::span<const transfer_trace> traces = {});
    /// Transfers their producer summed (transfer_tally), each once, into the same families
    /// apply_transfers() fills from records: the builders, the latency histograms (the tallies'
    /// bucket counts, on latency_bounds()), the time totals and the last-value gauges. Throws
    /// metrics_error when the histograms take no tallies (latency_bounds() is empty) and a
    /// tally has timed transfers, or when its bucket counts are not one more than the bounds.
    void apply_tallies(std::span<const transfer_tally> tallies, const label_table& labels);
    /// The bounds (µs) of the latency histograms when all four take counts by bucket on them:
    /// what a transfer_tally's buckets are counted on. Empty when they do not (native
    /// histograms need each value): then only records can carry timed transfers. Set once,
    /// with the families; safe from any thread.
    std::span<const double> latency_bounds() const noexcept { return latency_bounds_; }
    /// The pipeline's exporters: up or disabled, and the events each lost.
    void apply_health(std::span<const exporter_health> rows);
    /// What the back end's span stage has done (xtel/trace/span_stage.hpp), as totals: served
    /// as xtel_trace_spans_total{reason} and xtel_trace_spans_dropped_total{reason}, families
    /// made on the first call (an agent that writes no spans has none).
    using span_totals = xtel::span_totals;
    void apply_spans(const span_totals& totals);
    /// Adds a user's builder after the configured ones; its families are served beside the
    /// others. Throws metrics_error when one of its families is invalid, uses a reserved label
    /// or takes a name in use (then the builder is not added).
    void add_builder(std::unique_ptr<builder> b);
    /// Reserves the labels a node-file reader adds to every series (reserved_label_names), so
    /// that a builder added later that uses one is refused where it is added rather than its
    /// file by every reader. Called by the node exporter as it starts serving the model.
    void reserve_reader_labels();
    /// Publishes the store as a new snapshot when it changed since the last call.
    void publish();
    std::shared_ptr<const snapshot> latest() const;

    const std::string& agent_name() const noexcept { return agent_name_; }
    /// The rank the agent's series carry (agent_metrics_settings::rank).
    const process_rank& rank() const noexcept { return rank_; }

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
        series_ref series;
        metric_type type = metric_type::counter;
    };
    static constexpr std::uint32_t rejected = UINT32_MAX;
    /// One of this agent's own families, as its set's table names it (agent_families.cpp).
    struct family_row;
    /// What a family of the model is: of a set, about the telemetry itself, or anything else
    /// (a builder's, a user's event).
    enum class family_group : std::uint8_t { nixl, xtel, health, other };
    struct family_origin {
        family_group group = family_group::other;
        std::string_view event;  ///< the NIXL event it derives from, if any
    };
    /// The tables of the NIXL set and the xtel set, a row per family.
    static const family_row nixl_rows_[];
    static const family_row xtel_rows_[];

    /// The NIXL set and the xtel set, each from its table; `latency` the latency histograms'
    /// shape.
    void add_nixl_set(const latency_shape& latency);
    void add_xtel_set(const latency_shape& latency);
    /// Adds the families of `rows`, each labelled by `set_labels` before its own, and, where a
    /// row names a member, keeps the family or its series of `set_values` (made now, at 0).
    void add_family_set(std::span<const family_row> rows,
                        family_group group,
                        std::span<const std::string_view> set_labels,
                        std::span<const std::string_view> set_values,
                        bool fixed_labels,
                        const latency_shape& latency);

    /// Whether the family is served: of a set chosen (or of none), and allowed by the
    /// allowlist.
    bool serves(std::string_view name) const;
    bool allowed(std::string_view name, std::string_view event) const;
    /// The event of agent_errors_total: an allowlist item matches it when it matches one of
    /// agent_err_<status>.
    static constexpr std::string_view any_nixl_error = "agent_err_*";
    /// Whether `glob` matches the family `name` or the NIXL event it derives from.
    static bool matches(const std::string& glob, std::string_view name, std::string_view event);
    /// Logs, once, each allowlist item that matches none of the families served.
    void report_unmatched_allowlist() const;

    void apply_one(const event& e);
    /// Handles an event of a name this agent knows; false when the name is not one.
    bool apply_known(const event& e);
    void apply_memory(const event& e, bool registered);
    /// xtel_build_info's series, from the backend's ucx_version event (major * 10000 + minor *
    /// 100 + release, docs/events.md): the agent knows its transport's version, so the model
    /// names no transport library. The first event sets it; there is no series before it.
    void set_build_info(std::uint64_t ucx_version);
    /// Counts `value` NIXL events of NIXL's kind `type` that xtel has no name for
    /// (names::nixl_unmapped_prefix).
    void apply_nixl_unmapped(std::string_view type, std::uint64_t value);
    /// The index in events_ of the family `e` goes to, or rejected.
    std::uint32_t find_or_add(const event& e);
    /// Adds one of this agent's own families; its lines are reserved.
    family_id add_own(family_spec spec);
    /// add_own, and the series of `values`, made now (at 0).
    series_ref add_own_series(family_spec spec, std::initializer_list<std::string_view> values);
    /// The store's check on each new family: refuses a name this agent's own families use.
    void reserve_name(const family_spec& spec) const;
    /// Counts an event mapped to no family (xtel_telemetry_events_unmapped_total).
    void count_unmapped();
    const std::string& peer_name(label_id id, const label_table& labels);
    /// apply_transfers' notified records, counted in their families; the others, returned
    /// (`transfers` itself when there are none).
    std::span<const transfer_record> count_notified(std::span<const transfer_record> transfers,
                                                    const label_table& labels);
    /// The latency histograms and last-value gauges of the completed transfers, each tagged
    /// one's request id and span its bucket's exemplar (keep_last_exemplars).
    void observe_completed(std::span<const transfer_record> transfers,
                           const label_table& labels,
                           std::span<const transfer_trace> traces);
    /// The exemplars observe_completed's tagged transfers leave: each bucket the last one's that
    /// fell in it, as observing every transfer with its exemplar would leave it, with its
    /// strings copied once a round instead of once a transfer. Walks the round back, finding
    /// each transfer's buckets: for latency histograms that take no tallies.
    void keep_last_exemplars(std::span<const transfer_record> transfers,
                             const label_table& labels,
                             std::span<const transfer_trace> traces);
    /// The same exemplars when the latency histograms take tallies: the buckets' last tagged
    /// transfers, noted by tally(), given their exemplars (and the notes cleared).
    void keep_tallied_exemplars(std::span<const transfer_record> transfers,
                                std::span<const transfer_trace> traces);
    /// Gives bucket b of histogram series `s` the exemplar of transfer last_tagged[b] - 1 (none
    /// when 0), and clears last_tagged.
    void keep_bucket_exemplars(series_ref s,
                               std::vector<std::size_t>& last_tagged,
                               std::span<const transfer_record> transfers,
                               std::span<const transfer_trace> traces);
    /// Which buckets of which series keep_last_exemplars has given an exemplar this round.
    struct exemplar_marks {
        std::vector<std::pair<series_ref, std::size_t>> series;  // and its first mark's index
        std::vector<bool> marked;
        /// True the first time bucket `bucket` of `s` (of `buckets`) is asked for this round.
        bool first(series_ref s, std::size_t bucket, std::size_t buckets);
    };
    /// One round's observations of a peer's timed transfers, bucketed as they come and added
    /// to the latency series once, at the round's end (metric_store::add_observations): an
    /// observation per value cost the fold more than anything else.
    struct latency_tally {
        std::vector<std::uint64_t> xfer, post;  // per bucket: bounds + 1
        /// Per bucket of xfer: 1 + the round's index of the last tagged transfer in it; 0: none.
        std::vector<std::size_t> last_tagged;
        std::uint64_t xfer_sum = 0, post_sum = 0;
        bool touched = false;  // this round
    };
    /// A peer's {op, peer} latency series (by label id, then op), found by their label strings
    /// once: every timed transfer is observed in two of them, and in the two histograms of
    /// all transfers.
    struct peer_latency {
        series_ref duration, post;
        bool found = false;
        latency_tally tally;
    };
    peer_latency& latency_series(const transfer_attributes& a, const label_table& labels) {
        const label_id id = a.remote_agent;
        if (id < peer_latency_.size()) [[likely]] {
            peer_latency& p = peer_latency_[id][a.op == transfer_op::read ? 0 : 1];
            if (p.found) [[likely]] {
                return p;
            }
        }
        return find_latency_series(a, labels);
    }
    peer_latency& find_latency_series(const transfer_attributes& a, const label_table& labels);
    /// Whether the latency histograms take tallies: classic buckets only (native ones need
    /// each value), and the four of them on one set of bounds, as the settings' latency shape
    /// makes them, so that a value's bucket is found once for the four.
    bool tallies_latency() const;
    /// Counts timed transfer `r`, the round's `index`th, in the tally of its peer's series `p`
    /// (latency_series(r)), and notes it as its buckets' last tagged transfer when it is tagged.
    void tally(peer_latency& p, const transfer_record& r, std::size_t index);
    /// Adds the round's tallies to the latency histograms and clears them.
    void add_tallies();

    const std::string agent_name_;
    const std::string hostname_;
    const process_rank rank_;
    const std::vector<label> labels_;

    // Flusher state.
    std::unique_ptr<transfer_processor> processor_;
    // The NIXL set.
    series_ref xfer_time_us_, post_time_us_;        // histograms
    series_ref xfer_time_total_, post_time_total_;  // counters, µs
    series_ref xfer_time_last_, post_time_last_;    // gauges, µs
    series_ref tx_last_bytes_, rx_last_bytes_;
    series_ref mem_registered_total_, mem_deregistered_total_;
    series_ref mem_registered_last_, mem_deregistered_last_;
    series_ref nixl_dropped_;
    family_id nixl_errors_family_ = 0;
    /// By nixl_error_statuses index; none for a status the allowlist leaves out.
    std::vector<std::optional<series_ref>> nixl_errors_;
    // The xtel set.
    family_id duration_ = 0, post_duration_ = 0;  // {op, peer} histograms, seconds
    family_id errors_family_ = 0;
    std::vector<series_ref> errors_;  // by status_code
    series_ref mem_bytes_, registrations_, deregistrations_;
    series_ref dropped_, export_errors_, unmapped_;
    series_ref connections_, opened_, closed_, endpoint_errors_;
    family_id lanes_ = 0, exporter_up_ = 0, exporter_lost_ = 0;
    /// apply_health's rows as last set, an exporter each.
    struct health_row {
        std::string name;
        series_ref up{}, lost{};
        std::optional<std::uint64_t> up_value, lost_value;
        bool found = false;
    };
    std::vector<health_row> health_;
    family_id nixl_unmapped_ = 0;  // {type}, NIXL's events xtel has no name for
    family_id build_family_ = 0, info_family_ = 0;
    bool build_info_set_ = false;
    family_id notified_transfers_ = 0, notified_bytes_ = 0;  // {op, peer} counters
    /// apply_transfers' records less the notified ones, when a round has both.
    std::vector<transfer_record> own_transfers_;
    /// xtel_trace_spans_total's failed, slow, sampled; xtel_trace_spans_dropped_total's
    /// budget, ring: made by the first apply_spans.
    std::vector<series_ref> spans_;
    std::array<std::uint64_t, 5> span_values_{};
    // What the memory events said last: bytes registered now, deregistered since the start.
    std::uint64_t registered_now_ = 0;
    std::uint64_t deregistered_sum_ = 0;
    std::vector<std::string> peers_;  // label id -> name, filled as ids are met
    std::vector<std::array<peer_latency, 2>> peer_latency_;
    /// The peer_latency_ entries (label id * 2 + op's index) tallied this round.
    std::vector<std::size_t> tallied_;
    /// latency_tally::last_tagged for the histogram of all transfers (xfer_time_us_).
    std::vector<std::size_t> last_tagged_;
    bool tally_latency_ = false;          // tallies_latency(), once the families are made
    std::vector<double> latency_bounds_;  // their bounds when tally_latency_
    exemplar_marks exemplar_marks_;       // keep_last_exemplars' scratch, kept for its capacity
    std::vector<event_family> events_;
    std::map<std::string, std::uint32_t, std::less<>> dynamic_;  ///< event name -> events_ index
    /// Every line name (name, name_sum...) of this agent's own families.
    std::set<std::string, std::less<>> own_lines_;
    const family_sets sets_;
    const std::vector<std::string> enabled_;
    /// Whether each snapshot also carries the renamed families under their old names
    /// (agent_metrics_settings::compat_names).
    const bool compat_names_;
    std::map<std::string, family_origin, std::less<>> origins_;  ///< of the model's own families
    std::vector<bool> served_;  ///< by family id, filled as families appear
    std::uint64_t published_changes_ = 0;
    bool published_once_ = false;

    std::mutex state_mutex_;

    mutable std::mutex published_mutex_;
    std::shared_ptr<const snapshot> published_;
};

/// Maps an event name onto the metric name alphabet [a-zA-Z0-9_:], not starting with a digit.
std::string sanitize_metric_name(std::string_view name);

}  // namespace xtel::metrics
