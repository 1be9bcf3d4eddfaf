// The agent's metric model: its set-up, the health rows it folds, and what it publishes. Its
// families are in agent_families.cpp, its events in agent_events.cpp, its transfer records in
// agent_transfers.cpp.
#include "xtel/metrics/agent_metrics.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "core/log.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/renamed_families.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel::metrics {

namespace {

using metrics::family_spec;
using metrics::metric_type;

// NIXL_TELEMETRY_PROMETHEUS_BUILDERS is checked against the names the settings list; the
// processor must have a builder of each.
constexpr bool same_builders() {
    const auto& have = agent_metrics::transfer_processor::builder_names;
    const auto& said = agent_metrics_settings::known_builders;
    if (std::size(have) != std::size(said)) {
        return false;
    }
    for (std::size_t i = 0; i < std::size(have); ++i) {
        if (have[i] != said[i]) {
            return false;
        }
    }
    return true;
}
static_assert(same_builders(),
              "agent_metrics_settings::known_builders names the processor's builders");

/// The labels every series of the agent carries: its name, then its rank when it has one.
std::vector<metrics::label> agent_labels(const std::string& agent_name, const process_rank& rank) {
    std::vector<metrics::label> out{{"agent_name", agent_name}};
    if (rank.rank) {
        out.push_back({"rank", std::to_string(*rank.rank)});
    }
    if (rank.local_rank) {
        out.push_back({"local_rank", std::to_string(*rank.local_rank)});
    }
    return out;
}

}  // namespace

agent_metrics::agent_metrics(const exporter_context& ctx)
    : agent_metrics(ctx.agent_name, agent_metrics_settings::from_env()) {}

agent_metrics::agent_metrics(std::string agent_name, const agent_metrics_settings& settings)
    : agent_name_(std::move(agent_name)),
      hostname_(settings.hostname),
      rank_(settings.rank),
      labels_(agent_labels(agent_name_, settings.rank)),
      sets_(settings.sets),
      enabled_(settings.enabled_metrics),
      compat_names_(settings.compat_names) {
    metrics::processor_options opts;
    opts.max_series = settings.max_series;
    for (const metrics::label& l : labels_) {
        opts.reserved_labels.push_back(l.name);
    }
    opts.check = [this](const family_spec& spec) { reserve_name(spec); };
    opts.builders = settings.builders.value_or(agent_metrics_settings::default_builders(sets_));
    processor_ = std::make_unique<transfer_processor>(metrics::context{agent_name_, hostname_},
                                                      metrics::default_attributes(), opts);
    add_nixl_set(settings.latency());
    add_xtel_set(settings.latency());
    tally_latency_ = tallies_latency();
    if (tally_latency_) {
        latency_bounds_ = processor_->store().families()[xfer_time_us_.family].spec().bounds;
    }
    report_unmatched_allowlist();
    publish();
}

bool agent_metrics::matches(const std::string& glob,
                            std::string_view name,
                            std::string_view event) {
    if (!name.empty() && glob_matches(glob, name)) {
        return true;
    }
    if (event == any_nixl_error) {  // agent_errors_total: any of its statuses
        return std::any_of(std::begin(nixl_error_statuses), std::end(nixl_error_statuses),
                           [&](std::string_view status) {
                               return glob_matches(glob, fmt::format("agent_err_{}", status));
                           });
    }
    return !event.empty() && glob_matches(glob, event);
}

bool agent_metrics::allowed(std::string_view name, std::string_view event) const {
    return enabled_.empty() ||
           std::any_of(enabled_.begin(), enabled_.end(),
                       [&](const std::string& glob) { return matches(glob, name, event); });
}

bool agent_metrics::serves(std::string_view name) const {
    family_origin origin;
    if (const auto it = origins_.find(name); it != origins_.end()) {
        origin = it->second;
    }
    switch (origin.group) {
        case family_group::nixl:
            if (!has(sets_, family_sets::nixl)) {
                return false;
            }
            break;
        case family_group::xtel:
            if (!has(sets_, family_sets::xtel)) {
                return false;
            }
            break;
        case family_group::health:
        case family_group::other:
            break;
    }
    return allowed(name, origin.event);
}

void agent_metrics::report_unmatched_allowlist() const {
    const auto families = processor_->store().families();
    for (const std::string& glob : enabled_) {
        bool served = false;
        bool unserved_set = false;
        for (const auto& f : families) {
            const std::string_view name = f.spec().name;
            const auto it = origins_.find(name);
            const std::string_view event = it == origins_.end() ? "" : it->second.event;
            if (matches(glob, name, event)) {
                (serves(name) ? served : unserved_set) = true;
            }
        }
        if (served) {
            continue;
        }
        if (unserved_set) {
            xtel::detail::log(log_level::warning,
                              "{}='{}' (agent '{}'): '{}' names only metrics of a family set "
                              "NIXL_TELEMETRY_METRIC_SET={} does not serve; set "
                              "NIXL_TELEMETRY_METRIC_SET to {} to serve them",
                              env::enabled_metrics, fmt::join(enabled_, ","), agent_name_, glob,
                              to_string(sets_),
                              sets_ == family_sets::xtel ? "nixl or both" : "xtel or both");
        } else {
            xtel::detail::log(log_level::warning,
                              "{}='{}' (agent '{}'): '{}' matches no metric this agent serves; "
                              "it is ignored (docs/metrics.md lists the names)",
                              env::enabled_metrics, fmt::join(enabled_, ","), agent_name_, glob);
        }
    }
}

metrics::family_id agent_metrics::add_own(family_spec spec) {
    auto& store = processor_->store();
    auto lines = metrics::metric_store::line_names(spec.name, spec.type);
    const metrics::family_id id = store.add_family(std::move(spec));
    for (auto& l : lines) {
        own_lines_.insert(std::move(l));
    }
    return id;
}

series_ref agent_metrics::add_own_series(family_spec spec,
                                         std::initializer_list<std::string_view> values) {
    const auto id = add_own(std::move(spec));
    return processor_->store().series_of(id, values);
}

void agent_metrics::reserve_name(const family_spec& spec) const {
    for (const auto& line : metrics::metric_store::line_names(spec.name, spec.type)) {
        if (own_lines_.contains(line)) {
            throw metrics::metrics_error(fmt::format(
                "metric family '{}' is refused: agent '{}' already serves a family that uses the "
                "name; expected a name of its own",
                spec.name, agent_name_));
        }
    }
}

const std::string& agent_metrics::peer_name(label_id id, const label_table& labels) {
    if (id >= peers_.size()) {
        peers_.resize(static_cast<std::size_t>(id) + 1);
    }
    if (peers_[id].empty()) {
        // As readers show it: two peers whose names differ only in bytes that are not UTF-8
        // would otherwise be two series that every reader shows as one, and a node file with
        // a series twice is refused whole.
        peers_[id] = metrics::shown_value(labels.name(id));
    }
    return peers_[id];
}

void agent_metrics::apply_health(std::span<const exporter_health> rows) {
    const std::lock_guard lock(state_mutex_);
    auto& store = processor_->store();
    // The rows come every round, an exporter each in the pipeline's order: their series are
    // found once, and set only on a change, so that an idle agent publishes nothing new. (Found
    // by name and read back by name each round, they were the plug-in's largest cost per round
    // at NIXL's 10 ms flushes: docs/performance.md.)
    if (health_.size() < rows.size()) {
        health_.resize(rows.size());
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const exporter_health& row = rows[i];
        health_row& seen = health_[i];
        if (!seen.found || seen.name != row.name) {
            seen.name.assign(row.name);
            seen.up = store.series_of(exporter_up_, {row.name});
            seen.lost = store.series_of(exporter_lost_, {row.name});
            seen.up_value = store.value("xtel_telemetry_exporter_up", {row.name});
            seen.lost_value = store.value("xtel_telemetry_exporter_events_lost_total", {row.name});
            seen.found = true;
        }
        const std::uint64_t want = row.disabled ? 0 : 1;
        if (seen.up_value != want) {
            store.set(seen.up, want);
            seen.up_value = want;
        }
        if (seen.lost_value != row.events_lost) {
            store.set(seen.lost, row.events_lost);
            seen.lost_value = row.events_lost;
        }
    }
}

void agent_metrics::apply_spans(const span_totals& totals) {
    const std::lock_guard lock(state_mutex_);
    auto& store = processor_->store();
    if (spans_.empty()) {
        for (const char* name : {"xtel_trace_spans_total", "xtel_trace_spans_dropped_total"}) {
            origins_.insert_or_assign(name, family_origin{family_group::health, {}});
        }
        family_spec kept;
        kept.name = "xtel_trace_spans_total";
        kept.help =
            "Transfers written as spans to the agent's span ring, by why: failed, slow "
            "(NIXL_TELEMETRY_TRACE_SLOW_US) or sampled (NIXL_TELEMETRY_TRACE_SAMPLE).";
        kept.label_names = {"reason"};
        kept.fixed_labels = true;
        family_spec dropped = kept;
        dropped.name = "xtel_trace_spans_dropped_total";
        dropped.help =
            "Spans not written: over NIXL_TELEMETRY_TRACE_BUDGET (budget), or kept "
            "when the span ring could not take them (ring).";
        const family_id k = add_own(std::move(kept));
        const family_id d = add_own(std::move(dropped));
        for (const std::string_view why : {"failed", "slow", "sampled"}) {
            spans_.push_back(store.series_of(k, {why}));
        }
        for (const std::string_view why : {"budget", "ring"}) {
            spans_.push_back(store.series_of(d, {why}));
        }
    }
    const std::uint64_t values[] = {totals.failed, totals.slow, totals.sampled,
                                    totals.dropped_budget, totals.dropped_ring};
    // Set only on a change, so that an idle agent publishes nothing new.
    for (std::size_t i = 0; i < spans_.size(); ++i) {
        if (span_values_[i] != values[i]) {
            store.set(spans_[i], values[i]);
            span_values_[i] = values[i];
        }
    }
}

void agent_metrics::add_builder(std::unique_ptr<metrics::builder> b) {
    const std::lock_guard lock(state_mutex_);
    processor_->add_builder(std::move(b));
}

void agent_metrics::reserve_reader_labels() {
    // Refused where a builder is added, where its author learns why, rather than by the
    // readers, which would refuse the agent's whole file.
    const std::lock_guard lock(state_mutex_);
    processor_->store().reserve_labels(reserved_label_names);
}

void agent_metrics::publish() {
    const std::lock_guard lock(state_mutex_);
    const auto& store = processor_->store();
    if (published_once_ && store.changes() == published_changes_) {
        return;
    }
    // Families appear as builders and events make them; each is judged once.
    const auto families = store.families();
    for (std::size_t id = served_.size(); id < families.size(); ++id) {
        served_.push_back(serves(families[id].spec().name));
    }
    auto taken = metrics::take_snapshot(store, labels_, &served_);
    if (compat_names_) {
        add_old_names(taken);
    }
    std::shared_ptr<const metrics::snapshot> next =
        std::make_shared<const metrics::snapshot>(std::move(taken));
    {
        const std::lock_guard published_lock(published_mutex_);
        published_.swap(next);
    }
    published_changes_ = store.changes();
    published_once_ = true;
}

std::shared_ptr<const metrics::snapshot> agent_metrics::latest() const {
    const std::lock_guard lock(published_mutex_);
    return published_;
}

}  // namespace xtel::metrics
