#include "xtel/metrics/agent_metrics.hpp"

#include <fmt/format.h>

#include <ucp/api/ucp.h>
#include <unistd.h>
#include <cstring>
#include <iterator>
#include <utility>

#include "xtel/core/names.hpp"
#include "xtel/core/version.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel::metrics {

namespace {

using metrics::family_spec;
using metrics::metric_type;

/// Events the pipeline derives from transfer records. Their families are made from the records
/// themselves, so such an event reaching the exporter (recorded by hand) is passed over:
/// folding it would count a transfer twice.
constexpr event_name from_transfers[] = {
    names::agent_tx_bytes,        names::agent_tx_requests_num, names::agent_rx_bytes,
    names::agent_rx_requests_num, names::agent_xfer_time,       names::agent_xfer_post_time,
};

/// Events that say what the agent is, shown by the info metrics instead of as families.
constexpr event_name informational[] = {names::agent_start, names::agent_stop,
                                        names::ucx_backend_init, names::ucx_version};

constexpr std::string_view ignored_help =
    "Events the Prometheus exporter did not fold into a family: a value kind the family's type "
    "does not take, a name that collides with another family, or a name past the limit of "
    "distinct names.";

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

/// Names are NUL-padded to a fixed width, so equal names are mostly equal bytes: one compare.
/// The character-wise compare catches a name with stray padding.
bool same_name(const event_name& a, const event& e) noexcept {
    return std::memcmp(&a, &e.name, sizeof(event_name)) == 0 || a.view() == e.name_view();
}

template <std::size_t N>
bool one_of(const event_name (&names)[N], const event& e) noexcept {
    for (const event_name& n : names) {
        if (same_name(n, e)) {
            return true;
        }
    }
    return false;
}

std::string ucx_version_text() {
    unsigned major = 0, minor = 0, release = 0;
    ::ucp_get_version(&major, &minor, &release);
    return fmt::format("{}.{}.{}", major, minor, release);
}

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

std::string_view agent_metrics::nixl_status_of(status_code code) noexcept {
    switch (code) {
        case status_code::invalid_argument:
        case status_code::bad_metadata:
            return "invalid_param";
        case status_code::not_found:
            return "not_found";
        case status_code::busy:
            return "not_allowed";
        case status_code::not_supported:
            return "not_supported";
        case status_code::remote_disconnected:
            return "remote_disconnect";
        case status_code::timed_out:
            return "canceled";
        case status_code::backend_error:
            return "backend";
        case status_code::ok:
        case status_code::in_progress:
            break;
    }
    return "unknown";
}

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

agent_metrics::agent_metrics(const exporter_context& ctx)
    : agent_metrics(ctx.agent_name, agent_metrics_settings::from_env()) {}

agent_metrics::agent_metrics(std::string agent_name, const agent_metrics_settings& settings)
    : agent_name_(std::move(agent_name)),
      hostname_(settings.hostname),
      labels_(agent_labels(agent_name_, settings.rank)) {
    metrics::processor_options opts;
    opts.max_series = settings.max_series;
    for (const metrics::label& l : labels_) {
        opts.reserved_labels.push_back(l.name);
    }
    opts.check = [this](const family_spec& spec) { reserve_name(spec); };
    opts.builders = settings.builders;
    processor_ = std::make_unique<transfer_processor>(metrics::context{agent_name_, hostname_},
                                                      metrics::default_attributes(), opts);
    auto& store = processor_->store();
    // The legacy builder's four counters are NIXL's: at 0 from the start, as NIXL shows them.
    for (const auto* name : {"agent_tx_bytes_total", "agent_rx_bytes_total",
                             "agent_tx_requests_num_total", "agent_rx_requests_num_total"}) {
        if (const auto id = store.id_of(name)) {
            store.add(*id, {hostname_}, 0);
        }
    }
    const std::string_view host = hostname_;
    const auto nixl = [&](std::string name, std::string help, metric_type type,
                          std::vector<double> b = {}) {
        family_spec spec{std::move(name), std::move(help), type, {"hostname"}, 0, std::move(b)};
        spec.fixed_labels = true;  // one host name
        return add_own_series(std::move(spec), {host});
    };
    // ---- the NIXL set (upstream's names, help texts, types and units) ----
    tx_last_bytes_ =
        nixl("agent_tx_last_bytes", "Bytes sent by the last request", metric_type::gauge);
    rx_last_bytes_ =
        nixl("agent_rx_last_bytes", "Bytes received by the last request", metric_type::gauge);
    mem_registered_total_ =
        nixl("agent_memory_registered_total", "Cumulative memory registered", metric_type::counter);
    mem_registered_last_ = nixl("agent_memory_registered_last_bytes",
                                "Memory registered by the last operation", metric_type::gauge);
    mem_deregistered_total_ = nixl("agent_memory_deregistered_total",
                                   "Cumulative memory deregistered", metric_type::counter);
    mem_deregistered_last_ = nixl("agent_memory_deregistered_last_bytes",
                                  "Memory deregistered by the last operation", metric_type::gauge);
    xfer_time_total_ =
        nixl("agent_xfer_time_total", "Cumulative sum of transfer time from start to completion",
             metric_type::counter);
    xfer_time_last_ =
        nixl("agent_xfer_time", "Transfer time of the last request", metric_type::gauge);
    xfer_time_us_ = nixl("agent_xfer_time_us",
                         "Distribution of transfer time from start to completion, in microseconds",
                         metric_type::histogram, settings.buckets);
    post_time_total_ =
        nixl("agent_xfer_post_time_total",
             "Cumulative sum of time from start to posting to the back-end", metric_type::counter);
    post_time_last_ =
        nixl("agent_xfer_post_time", "Post time of the last request", metric_type::gauge);
    post_time_us_ =
        nixl("agent_xfer_post_time_us",
             "Distribution of time from start to posting to the back-end, in microseconds",
             metric_type::histogram, settings.buckets);
    nixl_dropped_ = nixl("agent_telemetry_events_dropped_total",
                         "Cumulative telemetry events dropped at the producer-side staging queue",
                         metric_type::counter);
    const auto nixl_errors = add_own({"agent_errors_total",
                                      "Cumulative error count by status",
                                      metric_type::counter,
                                      {"hostname", "status"},
                                      0,
                                      {},
                                      {},
                                      true});
    for (const std::string_view status : nixl_error_statuses) {
        nixl_errors_.push_back(store.series_of(nixl_errors, {host, status}));
    }

    // ---- the xtel set (base units in the names, variation in labels) ----
    // Both latency histograms keep microseconds (decimals 6: shown as seconds, exactly), with
    // the same bounds as NIXL's.
    duration_ = add_own({"xtel_transfer_duration_seconds",
                         "Seconds from a transfer's post to its completion, of the transfers "
                         "timed, by operation and peer; exemplars name a recent transfer's "
                         "request id.",
                         metric_type::histogram,
                         {"op", "peer"},
                         6,
                         settings.buckets,
                         "seconds"});
    post_duration_ = add_own({"xtel_transfer_post_duration_seconds",
                              "Seconds spent in the post call of the transfers timed, by "
                              "operation and peer.",
                              metric_type::histogram,
                              {"op", "peer"},
                              6,
                              settings.buckets,
                              "seconds"});
    const auto errors = add_own({"xtel_errors_total",
                                 "Operations the agent answered with an error, by the error's "
                                 "kind (xtel::status_code).",
                                 metric_type::counter,
                                 {"kind"},
                                 0,
                                 {},
                                 {},
                                 true});
    errors_.resize(status_code_count);
    for (std::size_t c = static_cast<std::size_t>(status_code::in_progress) + 1;
         c < status_code_count; ++c) {
        errors_[c] = store.series_of(errors, {to_string(static_cast<status_code>(c))});
    }
    const auto own = [&](std::string name, std::string help, metric_type type,
                         std::string unit = {}) {
        return add_own_series({std::move(name), std::move(help), type, {}, 0, {}, std::move(unit)},
                              {});
    };
    mem_bytes_ = own("xtel_memory_registered_bytes", "Bytes of memory registered now.",
                     metric_type::gauge, "bytes");
    registrations_ =
        own("xtel_memory_registrations_total",
            "Memory registrations (and allocations) that succeeded.", metric_type::counter);
    deregistrations_ = own("xtel_memory_deregistrations_total",
                           "Memory deregistrations that succeeded; what the agent deregisters "
                           "as it stops counts as one.",
                           metric_type::counter);
    connections_ =
        own("xtel_connections", "Remote agents loaded and usable now.", metric_type::gauge);
    opened_ = own("xtel_connections_opened_total", "Connections to remote agents opened.",
                  metric_type::counter);
    closed_ = own("xtel_connections_closed_total", "Connections to remote agents closed.",
                  metric_type::counter);
    endpoint_errors_ =
        own("xtel_ucx_endpoint_errors_total",
            "Errors UCX reported on an endpoint (a peer that went away).", metric_type::counter);
    lanes_ = add_own({"xtel_transport_lanes",
                      "UCX lanes of each transport on the agent's last connection that used it.",
                      metric_type::gauge,
                      {"transport"},
                      0,
                      {},
                      {},
                      true});
    dropped_ =
        own("xtel_telemetry_events_dropped_total",
            "Records dropped because a per-thread staging ring was full.", metric_type::counter);
    export_errors_ = own("xtel_telemetry_export_errors_total",
                         "Exporter calls that threw; the exporter goes on with the next batch.",
                         metric_type::counter);
    ignored_ = own("xtel_prometheus_ignored_events_total", std::string(ignored_help),
                   metric_type::counter);
    exporter_up_ = add_own({"xtel_exporter_up",
                            "1 while the agent's exporter works, 0 once it turned itself off "
                            "(a port it could not bind, a plugin that failed).",
                            metric_type::gauge,
                            {"exporter"},
                            0,
                            {},
                            {},
                            true});
    exporter_lost_ = add_own({"xtel_exporter_events_lost_total",
                              "Events an exporter was handed and could not keep.",
                              metric_type::counter,
                              {"exporter"},
                              0,
                              {},
                              {},
                              true});
    const auto build = add_own({"xtel_build_info",
                                "1: the xtel and UCX versions this agent runs.",
                                metric_type::gauge,
                                {"version", "ucx_version"},
                                0,
                                {},
                                {},
                                true});
    store.set(build, {version(), ucx_version_text()}, 1);
    // A node file's readers add the writer's pid themselves: the node exporter's encoding
    // leaves this label out (node_exporter.cpp).
    const auto info = add_own({"xtel_agent_info",
                               "1: the agent's backend and process; its transports are "
                               "xtel_transport_lanes.",
                               metric_type::gauge,
                               {"backend", "pid"},
                               0,
                               {},
                               {},
                               true});
    store.set(info, {"ucx", fmt::format_int(::getpid()).str()}, 1);
    publish();
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

metrics::series_ref agent_metrics::add_own_series(family_spec spec,
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

void agent_metrics::apply_transfers(std::span<const transfer_record> transfers,
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
        if (r.attrs.status != transfer_status::success) {
            continue;
        }
        if (r.requests > 0) {
            store.set(r.dir == direction::tx ? tx_last_bytes_ : rx_last_bytes_,
                      r.bytes / r.requests);
        }
        if (!r.timed) {
            continue;
        }
        store.add(xfer_time_total_, r.xfer_us);
        store.add(post_time_total_, r.post_us);
        store.set(xfer_time_last_, r.xfer_us);
        store.set(post_time_last_, r.post_us);
        const std::string_view op = to_string(r.attrs.op);
        const std::string_view peer = peer_name(r.attrs.remote_agent, labels);
        const auto duration = store.series_of(duration_, {op, peer});
        const auto post = store.series_of(post_duration_, {op, peer});
        if (r.request_id.empty()) {
            store.observe(xfer_time_us_, r.xfer_us);
            store.observe(duration, r.xfer_us);
        } else {
            const metrics::exemplar ex{"request_id", std::string(r.request_id), 0, r.timestamp_us};
            store.observe(xfer_time_us_, r.xfer_us, ex);
            store.observe(duration, r.xfer_us, ex);
        }
        store.observe(post_time_us_, r.post_us);
        store.observe(post, r.post_us);
    }
}

void agent_metrics::apply_health(std::span<const exporter_health> rows) {
    const std::lock_guard lock(state_mutex_);
    auto& store = processor_->store();
    for (const auto& row : rows) {
        const std::string_view name = row.name;
        // Set only on a change, so that an idle agent publishes nothing new.
        const auto up = store.series_of(exporter_up_, {name});
        const std::uint64_t want = row.disabled ? 0 : 1;
        if (store.value("xtel_exporter_up", {name}) != want) {
            store.set(up, want);
        }
        const auto lost = store.series_of(exporter_lost_, {name});
        if (store.value("xtel_exporter_events_lost_total", {name}) != row.events_lost) {
            store.set(lost, row.events_lost);
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

void agent_metrics::apply(std::span<const event> batch) {
    const std::lock_guard lock(state_mutex_);
    for (const event& e : batch) {
        apply_one(e);
    }
}

void agent_metrics::apply_memory(const event& e, bool registered) {
    auto& store = processor_->store();
    // Levels (what basic_agent sends: registered now, deregistered since the start) or, as
    // NIXL sends them, increments of one operation's bytes. A registration raises the level;
    // a deregistration lowers "registered" first, then raises "deregistered".
    std::uint64_t delta = 0;
    if (registered) {
        const std::uint64_t level =
            e.kind == value_kind::counter ? registered_now_ + e.value : e.value;
        delta = level > registered_now_ ? level - registered_now_ : 0;
        registered_now_ = level;
        store.set(mem_bytes_, level);
        if (delta > 0) {
            store.add(mem_registered_total_, delta);
            store.set(mem_registered_last_, delta);
            store.add(registrations_, 1);
        }
        return;
    }
    if (e.kind == value_kind::counter) {
        delta = e.value;
        registered_now_ = registered_now_ > delta ? registered_now_ - delta : 0;
        store.set(mem_bytes_, registered_now_);
    } else {
        delta = e.value > deregistered_sum_ ? e.value - deregistered_sum_ : 0;
    }
    deregistered_sum_ += delta;
    if (delta > 0) {
        store.add(mem_deregistered_total_, delta);
        store.set(mem_deregistered_last_, delta);
        store.add(deregistrations_, 1);
    }
}

bool agent_metrics::apply_known(const event& e) {
    auto& store = processor_->store();
    if (e.cat == category::error) {
        for (std::size_t c = static_cast<std::size_t>(status_code::in_progress) + 1;
             c < status_code_count; ++c) {
            const auto code = static_cast<status_code>(c);
            if (same_name(names::agent_error(code), e)) {
                if (e.kind == value_kind::gauge) {
                    ignore();
                    return true;
                }
                store.add(errors_[c], e.value);
                const auto nixl = nixl_status_of(code);
                for (std::size_t i = 0; i < std::size(nixl_error_statuses); ++i) {
                    if (nixl_error_statuses[i] == nixl) {
                        store.add(nixl_errors_[i], e.value);
                    }
                }
                return true;
            }
        }
    }
    const auto counter = [&](metrics::series_ref s) {
        if (e.kind == value_kind::gauge) {
            ignore();
        } else {
            store.add(s, e.value);
        }
    };
    if (same_name(names::agent_memory_registered, e)) {
        apply_memory(e, true);
    } else if (same_name(names::agent_memory_deregistered, e)) {
        apply_memory(e, false);
    } else if (same_name(names::telemetry_events_dropped, e)) {
        counter(dropped_);
        if (e.kind != value_kind::gauge) {
            store.add(nixl_dropped_, e.value);
        }
    } else if (same_name(names::telemetry_export_errors, e)) {
        counter(export_errors_);
    } else if (same_name(names::agent_connect, e)) {
        counter(opened_);
    } else if (same_name(names::agent_disconnect, e)) {
        counter(closed_);
    } else if (same_name(names::agent_connections, e)) {
        store.set(connections_, e.value);
    } else if (same_name(names::ucx_endpoint_error, e)) {
        counter(endpoint_errors_);
    } else if (e.name_view().starts_with(names::ucx_transport_prefix) &&
               e.name_view().size() > names::ucx_transport_prefix.size()) {
        store.set(lanes_, {e.name_view().substr(names::ucx_transport_prefix.size())}, e.value);
    } else if (one_of(informational, e) || one_of(from_transfers, e)) {
        // Shown by the info metrics, or made from the transfer records.
    } else {
        return false;
    }
    return true;
}

void agent_metrics::apply_one(const event& e) {
    if (apply_known(e)) {
        return;
    }
    const std::uint32_t index = find_or_add(e);
    if (index == rejected) {
        ignore();
        return;
    }
    const event_family& f = events_[index];
    auto& store = processor_->store();
    switch (f.type) {
        case metric_type::counter:
            if (e.kind == value_kind::counter) {
                store.add(f.series, e.value);
                return;
            }
            break;
        case metric_type::gauge:
            if (e.kind == value_kind::gauge) {
                store.set(f.series, e.value);
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

void agent_metrics::ignore() {
    processor_->store().add(ignored_, 1);
}

std::uint32_t agent_metrics::find_or_add(const event& e) {
    const std::string_view text = e.name_view();
    if (const auto it = dynamic_.find(text); it != dynamic_.end()) {
        return it->second;
    }
    if (dynamic_.size() >= agent_metrics_settings::max_dynamic_families) {
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
            for (std::uint32_t i = 0; i < events_.size(); ++i) {
                if (&store.families()[events_[i].series.family] == owner) {
                    index = i;
                    break;
                }
            }
        }
    } else {
        constexpr std::string_view how[] = {"the sum of its increments", "the last level set",
                                            "histogram", "the sum and count of its samples"};
        auto help = fmt::format("{} event '{}' (not one xtel knows): {}.", to_string(e.cat), text,
                                how[static_cast<std::size_t>(type)]);
        try {
            const auto series = add_own_series({std::move(name), std::move(help), type, {}}, {});
            index = static_cast<std::uint32_t>(events_.size());
            events_.push_back({series, type});
        } catch (const metrics::metrics_error&) {
            // Refused (its lines would collide with another family's): ignored and counted.
        }
    }
    dynamic_.emplace(std::string(text), index);
    return index;
}

void agent_metrics::publish() {
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

std::shared_ptr<const metrics::snapshot> agent_metrics::latest() const {
    const std::lock_guard lock(published_mutex_);
    return published_;
}

}  // namespace xtel::metrics
