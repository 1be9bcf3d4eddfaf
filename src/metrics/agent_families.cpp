// The agent's own families, one table per set (docs/metrics.md): the NIXL set with upstream's
// names, help texts, types and units, and the xtel set in base units with the variation in
// labels. A family is added by adding a row (and, when the model updates it, the member the row
// names).
#include <fmt/format.h>

#include <unistd.h>
#include <array>
#include <cstdint>
#include <iterator>

#include "xtel/core/version.hpp"
#include "xtel/metrics/agent_metrics.hpp"

namespace xtel::metrics {

struct agent_metrics::family_row {
    std::string_view name;
    std::string_view help;
    metric_type type = metric_type::counter;
    /// Its label names after those of its set (NIXL: hostname); empty ones are none.
    std::array<std::string_view, 2> labels{};
    std::string_view unit{};
    std::uint8_t decimals = 0;
    /// A histogram over the latency bounds (agent_metrics_settings::buckets).
    bool latency = false;
    /// Label values fixed by the agent (no overflow series), not one per peer.
    bool fixed_labels = false;
    /// Where its one series (the set's label values) is kept; made now, at 0.
    series_ref agent_metrics::*series = nullptr;
    /// Where the family is kept, for series made later.
    family_id agent_metrics::*family = nullptr;
    /// The NIXL set: the event it derives from, the name NIXL_TELEMETRY_ENABLED_METRICS
    /// matches (upstream's semantics).
    std::string_view event{};
    /// Whether the family describes the telemetry itself, served with either set.
    bool health = false;
};

namespace {

constexpr std::string_view unmapped_help =
    "Events the agent's metric model mapped to no family: a value kind the family's type does "
    "not take, a name that collides with another family, or a name past the limit of distinct "
    "names.";

}  // namespace

using enum metric_type;

// ---- the NIXL set: upstream's names, help texts, types and units ----
const agent_metrics::family_row agent_metrics::nixl_rows_[] = {
    {.name = "agent_tx_last_bytes",
     .help = "Bytes of the last completed WRITE this agent initiated",
     .type = gauge,
     .unit = "bytes",
     .series = &agent_metrics::tx_last_bytes_,
     .event = "agent_tx_bytes"},
    {.name = "agent_rx_last_bytes",
     .help = "Bytes of the last completed READ this agent initiated",
     .type = gauge,
     .unit = "bytes",
     .series = &agent_metrics::rx_last_bytes_,
     .event = "agent_rx_bytes"},
    {.name = "agent_memory_registered_total",
     .help = "Bytes of memory registered, summed over the agent's registrations (and allocations)",
     .series = &agent_metrics::mem_registered_total_,
     .event = "agent_memory_registered"},
    {.name = "agent_memory_registered_last_bytes",
     .help = "Bytes of memory the last registration registered",
     .type = gauge,
     .unit = "bytes",
     .series = &agent_metrics::mem_registered_last_,
     .event = "agent_memory_registered"},
    {.name = "agent_memory_deregistered_total",
     .help = "Bytes of memory deregistered, summed over the agent's deregistrations",
     .series = &agent_metrics::mem_deregistered_total_,
     .event = "agent_memory_deregistered"},
    {.name = "agent_memory_deregistered_last_bytes",
     .help = "Bytes of memory the last deregistration deregistered",
     .type = gauge,
     .unit = "bytes",
     .series = &agent_metrics::mem_deregistered_last_,
     .event = "agent_memory_deregistered"},
    {.name = "agent_xfer_time_total",
     .help = "Microseconds from post to completion, summed over the timed transfers this agent "
             "initiated",
     .series = &agent_metrics::xfer_time_total_,
     .event = "agent_xfer_time"},
    {.name = "agent_xfer_time",
     .help = "Microseconds from post to completion of the last timed transfer this agent initiated",
     .type = gauge,
     .series = &agent_metrics::xfer_time_last_,
     .event = "agent_xfer_time"},
    {.name = "agent_xfer_time_us",
     .help = "Microseconds from post to completion of the timed transfers this agent initiated",
     .type = histogram,
     .unit = "us",
     .latency = true,
     .series = &agent_metrics::xfer_time_us_,
     .event = "agent_xfer_time"},
    {.name = "agent_xfer_post_time_total",
     .help = "Microseconds spent in the post call, summed over the timed transfers this agent "
             "initiated",
     .series = &agent_metrics::post_time_total_,
     .event = "agent_xfer_post_time"},
    {.name = "agent_xfer_post_time",
     .help = "Microseconds spent in the post call of the last timed transfer this agent initiated",
     .type = gauge,
     .series = &agent_metrics::post_time_last_,
     .event = "agent_xfer_post_time"},
    {.name = "agent_xfer_post_time_us",
     .help = "Microseconds spent in the post call of the timed transfers this agent initiated",
     .type = histogram,
     .unit = "us",
     .latency = true,
     .series = &agent_metrics::post_time_us_,
     .event = "agent_xfer_post_time"},
    {.name = "agent_telemetry_events_dropped_total",
     .help = "Telemetry records dropped because the recording thread's staging ring was full",
     .series = &agent_metrics::nixl_dropped_,
     .event = "agent_telemetry_events_dropped"},
    {.name = "agent_errors_total",
     .help = "Operations the agent answered with an error, by upstream NIXL's status",
     .labels = {"status"},
     .family = &agent_metrics::nixl_errors_family_},
};

// ---- the xtel set: base units in the names, variation in labels ----
// Both latency histograms keep microseconds (decimals 6: shown as seconds, exactly), with the
// same bounds as NIXL's.
const agent_metrics::family_row agent_metrics::xtel_rows_[] = {
    {.name = "xtel_transfer_duration_seconds",
     .help = "Seconds from the post of a transfer this agent initiated to the poll that saw it "
             "complete (its post duration when it completed inside the post), of the transfers "
             "timed, by operation and remote agent; exemplars name a recent transfer's request "
             "id.",
     .type = histogram,
     .labels = {"operation", "remote_agent"},
     .unit = "seconds",
     .decimals = 6,
     .latency = true,
     .family = &agent_metrics::duration_},
    {.name = "xtel_transfer_post_duration_seconds",
     .help = "Seconds spent in the post call of the timed transfers this agent initiated, by "
             "operation and remote agent; a transfer that completes inside it spends its whole "
             "duration there.",
     .type = histogram,
     .labels = {"operation", "remote_agent"},
     .unit = "seconds",
     .decimals = 6,
     .latency = true,
     .family = &agent_metrics::post_duration_},
    {.name = "xtel_notified_transfers_total",
     .help = "Transfers other agents made into (or from) this agent's memory and notified it "
             "of, by operation and the remote agent that initiated them; not counted in this "
             "agent's own transfer families.",
     .labels = {"operation", "remote_agent"},
     .family = &agent_metrics::notified_transfers_},
    {.name = "xtel_notified_bytes_total",
     .help = "Bytes of the transfers other agents notified this agent of, by operation and the "
             "remote agent that initiated them.",
     .labels = {"operation", "remote_agent"},
     .unit = "bytes",
     .family = &agent_metrics::notified_bytes_},
    {.name = "xtel_errors_total",
     .help = "Operations the agent answered with an error, by the error's kind "
             "(xtel::status_code).",
     .labels = {"kind"},
     .fixed_labels = true,
     .family = &agent_metrics::errors_family_},
    {.name = "xtel_memory_registered_bytes",
     .help = "Bytes of memory registered now: what peers that loaded this agent's metadata may "
             "read and write.",
     .type = gauge,
     .unit = "bytes",
     .series = &agent_metrics::mem_bytes_},
    {.name = "xtel_memory_registrations_total",
     .help = "Memory registrations (and allocations) that succeeded.",
     .series = &agent_metrics::registrations_},
    {.name = "xtel_memory_deregistrations_total",
     .help = "Memory deregistrations that succeeded; what the agent deregisters as it stops "
             "counts as one.",
     .series = &agent_metrics::deregistrations_},
    {.name = "xtel_connections",
     .help = "Remote agents whose metadata this agent loaded, usable now; peers that reach this "
             "agent without its loading theirs are not known to it.",
     .type = gauge,
     .series = &agent_metrics::connections_},
    {.name = "xtel_connections_opened_total",
     .help = "Connections to remote agents opened.",
     .series = &agent_metrics::opened_},
    {.name = "xtel_connections_closed_total",
     .help = "Connections to remote agents closed.",
     .series = &agent_metrics::closed_},
    {.name = "xtel_ucx_endpoint_errors_total",
     .help = "Errors UCX reported on an endpoint (a peer that went away).",
     .series = &agent_metrics::endpoint_errors_},
    {.name = "xtel_transport_lanes",
     .help = "UCX lanes of each transport on the agent's last connection that used it.",
     .type = gauge,
     .labels = {"transport"},
     .fixed_labels = true,
     .family = &agent_metrics::lanes_},
    {.name = "xtel_telemetry_events_dropped_total",
     .help = "Records dropped because a per-thread staging ring was full.",
     .series = &agent_metrics::dropped_},
    {.name = "xtel_telemetry_export_errors_total",
     .help = "Exporter calls that threw; the exporter goes on with the next batch.",
     .series = &agent_metrics::export_errors_,
     .health = true},
    {.name = "xtel_telemetry_events_unmapped_total",
     .help = unmapped_help,
     .series = &agent_metrics::unmapped_,
     .health = true},
    {.name = "xtel_telemetry_exporter_up",
     .help = "1 while the agent's exporter works, 0 once it turned itself off (a port it "
             "could not bind, a plugin that failed).",
     .type = gauge,
     .labels = {"exporter"},
     .fixed_labels = true,
     .family = &agent_metrics::exporter_up_,
     .health = true},
    {.name = "xtel_telemetry_exporter_events_lost_total",
     .help = "Events an exporter was handed and could not keep.",
     .labels = {"exporter"},
     .fixed_labels = true,
     .family = &agent_metrics::exporter_lost_,
     .health = true},
    {.name = "xtel_build_info",
     .help = "1: the xtel and UCX versions this agent runs.",
     .type = gauge,
     .labels = {"version", "ucx_version"},
     .fixed_labels = true,
     // Its series is set from the backend's ucx_version event (agent_events.cpp): the agent
     // knows its transport's version, the model links no transport library.
     .family = &agent_metrics::build_family_,
     .health = true},
    // A node file's readers add the writer's pid themselves: the node exporter's encoding
    // leaves this label out (node_exporter.cpp).
    {.name = "xtel_agent_info",
     .help = "1: the agent's backend and process; its transports are xtel_transport_lanes.",
     .type = gauge,
     .labels = {"backend", "pid"},
     .fixed_labels = true,
     .family = &agent_metrics::info_family_,
     .health = true},
    // Set from the agent_start event (agent_events.cpp); no series before it.
    {.name = "xtel_agent_start_time_seconds",
     .help = "When the agent started, in seconds since the epoch: a change is a restart.",
     .type = gauge,
     .unit = "seconds",
     .decimals = 6,
     .health = true},
};

void agent_metrics::add_nixl_set(const latency_shape& latency) {
    // Every family of the set is labelled by the one host name (fixed labels).
    constexpr std::string_view set_labels[] = {"hostname"};
    const std::string_view host = hostname_;
    add_family_set(nixl_rows_, family_group::nixl, set_labels, std::span(&host, 1), true, latency);
    // The legacy builder's counters are NIXL's too: at 0 from the start, as NIXL shows them.
    auto& store = processor_->store();
    for (const auto& c : legacy_counters) {
        std::string_view event = c.name;
        event.remove_suffix(std::string_view("_total").size());
        origins_.insert_or_assign(std::string(c.name), family_origin{family_group::nixl, event});
        if (const auto id = store.id_of(c.name)) {
            store.add(*id, {host}, 0);
        }
    }
    // agent_err_<status> selects that status's series (upstream's semantics).
    origins_.insert_or_assign("agent_errors_total",
                              family_origin{family_group::nixl, any_nixl_error});
    for (const std::string_view status : nixl_error_statuses) {
        if (allowed({}, fmt::format("agent_err_{}", status))) {
            nixl_errors_.emplace_back(store.series_of(nixl_errors_family_, {host, status}));
        } else {
            nixl_errors_.emplace_back();
        }
    }
}

void agent_metrics::add_xtel_set(const latency_shape& latency) {
    add_family_set(xtel_rows_, family_group::xtel, {}, {}, false, latency);
    auto& store = processor_->store();
    errors_.resize(status_code_count);
    for (std::size_t c = static_cast<std::size_t>(status_code::in_progress) + 1;
         c < status_code_count; ++c) {
        errors_[c] = store.series_of(errors_family_, {to_string(static_cast<status_code>(c))});
    }
    store.set(info_family_, {"ucx", fmt::format_int(::getpid()).str()}, 1);
    origins_.insert_or_assign(std::string(metric_store::folded_family),
                              family_origin{family_group::health, {}});
}

void agent_metrics::add_family_set(std::span<const family_row> rows,
                                   family_group group,
                                   std::span<const std::string_view> set_labels,
                                   std::span<const std::string_view> set_values,
                                   bool fixed_labels,
                                   const latency_shape& latency) {
    for (const family_row& row : rows) {
        origins_.insert_or_assign(
            std::string(row.name),
            family_origin{row.health ? family_group::health : group, row.event});
        family_spec spec;
        spec.name = row.name;
        spec.help = row.help;
        spec.type = row.type;
        spec.label_names.assign(set_labels.begin(), set_labels.end());
        for (const std::string_view l : row.labels) {
            if (!l.empty()) {
                spec.label_names.emplace_back(l);
            }
        }
        spec.decimals = row.decimals;
        if (row.latency) {
            spec.bounds = latency.bounds;
            spec.native = latency.native;
            spec.native_schema = latency.native_schema;
        }
        spec.unit = row.unit;
        spec.fixed_labels = fixed_labels || row.fixed_labels;
        const family_id id = add_own(std::move(spec));
        if (row.family != nullptr) {
            this->*row.family = id;
        }
        if (row.series != nullptr) {
            this->*row.series = processor_->store().series_of(id, set_values);
        }
    }
}

}  // namespace xtel::metrics
