#include "exporters/prometheus/prometheus_agent.hpp"

#include <fmt/format.h>

#include <cstring>
#include <iterator>
#include <utility>

#include "xtel/exporters/prometheus.hpp"
#include "xtel/names.hpp"

namespace xtel::detail {

namespace {

using metrics::family_spec;
using metrics::metric_type;

/// Event families every agent has from the start, at 0.
struct builtin_event_family {
    event_name event;
    std::string_view name;
    metric_type type;
    std::string_view help;
};

constexpr builtin_event_family builtin_events[] = {
    {names::agent_memory_registered, "agent_memory_registered", metric_type::gauge,
     "Bytes of memory registered, as the agent last reported it."},
    {names::agent_memory_deregistered, "agent_memory_deregistered", metric_type::gauge,
     "Bytes of memory deregistered, as the agent last reported it."},
    {names::telemetry_events_dropped, "telemetry_events_dropped_total", metric_type::counter,
     "Telemetry events dropped because a per-thread staging ring was full."},
};
constexpr auto builtin_count = static_cast<std::uint32_t>(std::size(builtin_events));

/// The events the pipeline derives from transfer records. Their families are made from the
/// records themselves (the legacy builder, the time histograms), so such an event reaching the
/// exporter (recorded by hand) is passed over: folding it would count a transfer twice.
constexpr event_name from_transfers[] = {
    names::agent_tx_bytes,        names::agent_tx_requests_num, names::agent_rx_bytes,
    names::agent_rx_requests_num, names::agent_xfer_time,       names::agent_xfer_post_time,
};

constexpr std::string_view ignored_help =
    "Events the Prometheus exporter did not fold into a family: a value kind the family's type "
    "does not take, a name that collides with another family, or a name past the limit of "
    "distinct names.";

// NIXL_TELEMETRY_PROMETHEUS_BUILDERS is checked against the names the settings list; the
// processor must have a builder of each.
constexpr bool same_builders() {
    const auto& have = prometheus_agent::transfer_processor::builder_names;
    const auto& said = prometheus_settings::known_builders;
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
              "prometheus_settings::known_builders names the processor's builders");

/// Names are NUL-padded to a fixed width, so equal names are mostly equal bytes: one compare.
/// The character-wise compare catches a name with stray padding.
bool same_name(const event_name& a, const event& e) noexcept {
    return std::memcmp(&a, &e.name, sizeof(event_name)) == 0 || a.view() == e.name_view();
}

bool derived_from_transfers(const event& e) noexcept {
    for (const event_name& n : from_transfers) {
        if (same_name(n, e)) {
            return true;
        }
    }
    return false;
}

}  // namespace

std::string sanitize_metric_name(std::string_view name) {
    std::string out;
    out.reserve(name.size() + 1);
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
        out += '_';
    }
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == ':';
        out += ok ? c : '_';
    }
    return out;
}

prometheus_agent::prometheus_agent(std::string agent_name,
                                   std::string_view hostname,
                                   std::vector<double> bounds,
                                   const std::vector<std::string>& builders,
                                   std::size_t max_series)
    : agent_name_(std::move(agent_name)),
      labels_{{"agent_name", agent_name_}, {"hostname", std::string(hostname)}} {
    metrics::processor_options opts;
    opts.max_series = max_series;
    opts.reserved_labels = {"agent_name", "hostname"};
    opts.check = [this](const family_spec& spec) { reserve_name(spec); };
    opts.builders = builders;
    processor_ = std::make_unique<transfer_processor>(
        metrics::context{agent_name_, std::string(hostname)}, metrics::default_attributes(), opts);
    xfer_time_ = add_own({"agent_xfer_time",
                          "Transfer time in microseconds, from post to completion.",
                          metric_type::histogram,
                          {},
                          0,
                          bounds});
    post_time_ = add_own({"agent_xfer_post_time",
                          "Time to post a transfer, in microseconds.",
                          metric_type::histogram,
                          {},
                          0,
                          std::move(bounds)});
    for (const auto& b : builtin_events) {
        events_.push_back(
            {add_own({std::string(b.name), std::string(b.help), b.type, {}}), b.type, true});
    }
    ignored_ = add_own({"telemetry_prometheus_ignored_events_total",
                        std::string(ignored_help),
                        metric_type::counter,
                        {}});
    publish();
}

metrics::series_ref prometheus_agent::add_own(family_spec spec) {
    auto& store = processor_->store();
    auto lines = metrics::metric_store::line_names(spec.name, spec.type);
    const metrics::family_id id = store.add_family(std::move(spec));
    for (auto& l : lines) {
        own_lines_.insert(std::move(l));
    }
    return store.series_of(id, {});
}

void prometheus_agent::reserve_name(const family_spec& spec) const {
    for (const auto& line : metrics::metric_store::line_names(spec.name, spec.type)) {
        if (own_lines_.contains(line)) {
            throw metrics::metrics_error(fmt::format(
                "metric family '{}' is refused: agent '{}' already serves a family that uses the "
                "name; expected a name of its own",
                spec.name, agent_name_));
        }
    }
}

void prometheus_agent::apply_transfers(std::span<const transfer_record> transfers,
                                       const label_table& labels) {
    if (transfers.empty()) {
        return;
    }
    const std::lock_guard lock(state_mutex_);
    processor_->process(transfers, labels);
    // The histograms need each value, which the processor's groups sum away: one observation
    // per completed transfer whose times were measured (config::timing_sample).
    auto& store = processor_->store();
    for (const transfer_record& r : transfers) {
        if (r.timed && r.attrs.status == transfer_status::success) {
            store.observe(xfer_time_, r.xfer_us);
            store.observe(post_time_, r.post_us);
        }
    }
}

void prometheus_agent::add_builder(std::unique_ptr<metrics::builder> b) {
    const std::lock_guard lock(state_mutex_);
    processor_->add_builder(std::move(b));
}

void prometheus_agent::apply(std::span<const event> batch) {
    const std::lock_guard lock(state_mutex_);
    for (const event& e : batch) {
        apply_one(e);
    }
}

void prometheus_agent::apply_one(const event& e) {
    const std::uint32_t index = find_or_add(e);
    if (index == passed_over) {
        return;
    }
    if (index == rejected) {
        ignore();
        return;
    }
    const event_family& f = events_[index];
    auto& store = processor_->store();
    switch (f.type) {
        case metric_type::counter:
            // A built-in counter also takes a plain sample as an increment: NIXL records one
            // event per transfer. A gauge (a level) cannot be added to a counter.
            if (e.kind == value_kind::counter || (f.builtin && e.kind == value_kind::sample)) {
                store.add(f.series, e.value);
                return;
            }
            break;
        case metric_type::gauge:
            if (e.kind == value_kind::gauge || (f.builtin && e.kind == value_kind::sample)) {
                store.set(f.series, e.value);
                return;
            }
            if (f.builtin && e.kind == value_kind::counter) {
                // Memory sent as increments accumulates: registered minus deregistered is then
                // what is registered now.
                store.add(f.series, e.value);
                return;
            }
            break;
        case metric_type::summary:
            if (e.kind == value_kind::sample) {
                store.observe(f.series, e.value);
                return;
            }
            break;
        case metric_type::histogram:
            break;
    }
    ignore();
}

void prometheus_agent::ignore() {
    processor_->store().add(ignored_, 1);
}

std::uint32_t prometheus_agent::find_or_add(const event& e) {
    for (std::uint32_t i = 0; i < builtin_count; ++i) {
        if (same_name(builtin_events[i].event, e)) {
            return i;
        }
    }
    if (derived_from_transfers(e)) {
        return passed_over;
    }
    const std::string_view text = e.name_view();
    if (const auto it = dynamic_.find(text); it != dynamic_.end()) {
        return it->second;
    }
    if (dynamic_.size() >= prometheus_settings::max_dynamic_families) {
        return rejected;
    }
    const metric_type type = e.kind == value_kind::counter ? metric_type::counter
                             : e.kind == value_kind::gauge ? metric_type::gauge
                                                           : metric_type::summary;
    std::string name = sanitize_metric_name(text);
    if (type == metric_type::counter && !name.ends_with("_total")) {
        name += "_total";
    }
    std::uint32_t index = rejected;
    const auto& store = processor_->store();
    if (const auto* owner = store.owner_of_line(name); owner != nullptr) {
        // Names that differ only in characters the metric alphabet lacks share a family.
        if (owner->spec().name == name && owner->spec().type == type) {
            for (std::uint32_t i = builtin_count; i < events_.size(); ++i) {
                if (&store.families()[events_[i].series.family] == owner) {
                    index = i;
                    break;
                }
            }
        }
    } else {
        constexpr std::string_view how[] = {"counter increments", "the last level set", "histogram",
                                            "sum and count of samples"};
        auto help = fmt::format("{} event {}: {}.", to_string(e.cat), text,
                                how[static_cast<std::size_t>(type)]);
        try {
            const auto series = add_own({std::move(name), std::move(help), type, {}});
            index = static_cast<std::uint32_t>(events_.size());
            events_.push_back({series, type, false});
        } catch (const metrics::metrics_error&) {
            // Refused (its lines would collide with another family's): ignored and counted.
        }
    }
    dynamic_.emplace(std::string(text), index);
    return index;
}

void prometheus_agent::publish() {
    const std::lock_guard lock(state_mutex_);
    const auto& store = processor_->store();
    if (published_once_ && store.changes() == published_changes_) {
        return;
    }
    std::shared_ptr<const metrics::snapshot> next =
        std::make_shared<const metrics::snapshot>(metrics::take_snapshot(store, labels_));
    {
        const std::lock_guard published_lock(published_mutex_);
        published_.swap(next);
    }
    published_changes_ = store.changes();
    published_once_ = true;
}

std::shared_ptr<const metrics::snapshot> prometheus_agent::snapshot() const {
    const std::lock_guard lock(published_mutex_);
    return published_;
}

}  // namespace xtel::detail
