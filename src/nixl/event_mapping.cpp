#include "nixl/event_mapping.hpp"

#include <array>
#include <cstddef>
#include <optional>

#include "xtel/core/names.hpp"
#include "xtel/core/status.hpp"
#include "xtel/metrics/agent_metrics.hpp"

namespace xtel::nixl {

namespace {

using abi_v2::event_type;
using namespace mapping_detail;

/// xtel's error kind for NIXL's error event types 8..19 (nixl_status_t -1..-12), in order; ok
/// where xtel has no kind of that meaning. The inverse of the metric model's nixl_status_of
/// (xtel/metrics/agent_metrics.hpp), so that NIXL's error families count what NIXL counted.
constexpr std::array<status_code, abi_v2::last_error_type - abi_v2::first_error_type + 1>
    error_kinds = {
        status_code::ok,                   // NOT_POSTED
        status_code::invalid_argument,     // INVALID_PARAM
        status_code::backend_error,        // BACKEND
        status_code::not_found,            // NOT_FOUND
        status_code::ok,                   // MISMATCH
        status_code::busy,                 // NOT_ALLOWED
        status_code::ok,                   // REPOST_ACTIVE
        status_code::ok,                   // UNKNOWN
        status_code::not_supported,        // NOT_SUPPORTED
        status_code::remote_disconnected,  // REMOTE_DISCONNECT
        status_code::timed_out,            // CANCELED
        status_code::ok,                   // NO_TELEMETRY
};

event counter(std::uint64_t now_us, category cat, const event_name& name, std::uint64_t value) {
    event e;
    e.timestamp_us = now_us;
    e.value = value;
    e.cat = cat;
    e.kind = value_kind::counter;
    e.name = name;
    return e;
}

/// The event of a NIXL event whose kind xtel has no name for: a names::nixl_unmapped_prefix
/// counter under NIXL's name of the kind, which the model serves (and, for NIXL's error kinds,
/// counts in NIXL's agent_errors_total as NIXL's own exporter does).
event unmapped_event(const abi_v2::event& in, std::uint64_t now_us) {
    using metrics::agent_metrics;
    const auto type = static_cast<std::uint32_t>(in.type);
    // nixl_error_statuses lists NIXL's error kinds in the order of their types.
    static_assert(std::size(agent_metrics::nixl_error_statuses) ==
                  abi_v2::last_error_type - abi_v2::first_error_type + 1);
    const bool error = type >= abi_v2::first_error_type && type <= abi_v2::last_error_type;
    const std::string_view kind =
        error ? agent_metrics::nixl_error_statuses[type - abi_v2::first_error_type] : "undefined";
    char name[max_name_length + 1] = {};
    const std::size_t n = names::nixl_unmapped_prefix.copy(name, max_name_length);
    kind.copy(name + n, max_name_length - n);
    return counter(now_us, error ? category::error : category::system, event_name(name), in.value);
}

/// An event that is not part of a transfer, or nullopt when xtel has no name for its kind.
std::optional<event> single_event(const abi_v2::event& in, std::uint64_t now_us) {
    const auto type = static_cast<std::uint32_t>(in.type);
    switch (in.type) {
        case event_type::memory_registered:
            return counter(now_us, category::memory, names::agent_memory_registered, in.value);
        case event_type::memory_deregistered:
            return counter(now_us, category::memory, names::agent_memory_deregistered, in.value);
        case event_type::telemetry_events_dropped:
            return counter(now_us, category::system, names::telemetry_events_dropped, in.value);
        default:
            break;
    }
    if (type >= abi_v2::first_error_type && type <= abi_v2::last_error_type) {
        const status_code kind = error_kinds[type - abi_v2::first_error_type];
        if (kind != status_code::ok) {
            return counter(now_us, category::error, names::agent_error(kind), in.value);
        }
    }
    return std::nullopt;
}

}  // namespace

void flush_mapper::add_ending(const abi_v2::event& e, mapped_flush& out) {
    transfer_.finish(now_us_, out);
    if (transfer_part part{}; part_of(e.type, part)) {
        transfer_.add(part, e.value);
        return;
    }
    if (const auto mapped = single_event(e, now_us_)) {
        out.events.push_back(*mapped);
    } else {
        out.events.push_back(unmapped_event(e, now_us_));
        ++out.unmapped;
    }
}

void map_flush(std::span<const abi_v2::event> in, std::uint64_t now_us, mapped_flush& out) {
    flush_mapper mapper;
    mapper.begin(now_us);
    for (const abi_v2::event& e : in) {
        mapper.add(e, out);
    }
    mapper.end(out);
}

}  // namespace xtel::nixl
