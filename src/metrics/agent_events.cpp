// The agent's metric model, its events: what is not derived from transfer records (memory,
// errors, connections, the dropped-events counter, a user's own events) folded into families.
#include <fmt/format.h>

#include <cstring>
#include <iterator>

#include "xtel/core/names.hpp"
#include "xtel/core/version.hpp"
#include "xtel/metrics/agent_metrics.hpp"

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
constexpr event_name informational[] = {names::agent_stop, names::ucx_backend_init};

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
                    count_unmapped();
                    return true;
                }
                store.add(errors_[c], e.value);
                const auto nixl = nixl_status_of(code);
                for (std::size_t i = 0; i < std::size(nixl_error_statuses); ++i) {
                    if (nixl_error_statuses[i] == nixl && nixl_errors_[i]) {
                        store.add(*nixl_errors_[i], e.value);
                    }
                }
                return true;
            }
        }
    }
    const auto counter = [&](metrics::series_ref s) {
        if (e.kind == value_kind::gauge) {
            count_unmapped();
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
    } else if (same_name(names::ucx_version, e)) {
        set_build_info(e.value);
    } else if (same_name(names::agent_start, e)) {
        // Once per agent: looked up by name rather than kept (agent_families.cpp's row).
        if (const auto id = store.id_of("xtel_agent_start_time_seconds")) {
            store.set(*id, std::span<const std::string_view>{}, e.timestamp_us);
        }
    } else if (one_of(informational, e) || one_of(from_transfers, e)) {
        // Shown by the info metrics, or made from the transfer records.
    } else {
        return false;
    }
    return true;
}

void agent_metrics::set_build_info(std::uint64_t ucx_version) {
    if (build_info_set_) {
        return;  // the backend says it once; a second one cannot make a second series
    }
    build_info_set_ = true;
    const std::string ucx =
        fmt::format("{}.{}.{}", ucx_version / 10000, ucx_version / 100 % 100, ucx_version % 100);
    processor_->store().set(build_family_, {version(), ucx}, 1);
}

void agent_metrics::apply_one(const event& e) {
    if (apply_known(e)) {
        return;
    }
    const std::uint32_t index = find_or_add(e);
    if (index == rejected) {
        count_unmapped();
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
    count_unmapped();
}

void agent_metrics::count_unmapped() {
    processor_->store().add(unmapped_, 1);
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

}  // namespace xtel::metrics
