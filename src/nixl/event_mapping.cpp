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

/// What a transfer event tells of its transfer, as an index into its values.
enum class role : std::uint8_t { bytes, requests, xfer_time, post_time };

/// A transfer event's part: its role, and the direction it names, if any (the times name none).
/// Plain bytes rather than std::optional, and the gatherer below makes its record in place: this
/// loop runs for every event on NIXL's flush thread, and its earlier form (std::optional members,
/// a whole record reset and copied a transfer) cost 4.6 ns more an event, of about 32
/// (BM_nixl_flush_paired/4096, docs/performance.md).
struct transfer_part {
    role what;
    std::uint8_t dir;  ///< dir_none, or 1 + the direction
};
inline constexpr std::uint8_t dir_none = 0;
constexpr std::uint8_t dir_code(direction d) noexcept {
    return static_cast<std::uint8_t>(1 + static_cast<std::uint8_t>(d));
}

/// The part of a transfer an event of type `t` is; false when it is none.
bool part_of(event_type t, transfer_part& out) noexcept {
    switch (t) {
        case event_type::tx_bytes:
            out = {role::bytes, dir_code(direction::tx)};
            return true;
        case event_type::rx_bytes:
            out = {role::bytes, dir_code(direction::rx)};
            return true;
        case event_type::tx_requests_num:
            out = {role::requests, dir_code(direction::tx)};
            return true;
        case event_type::rx_requests_num:
            out = {role::requests, dir_code(direction::rx)};
            return true;
        case event_type::xfer_time:
            out = {role::xfer_time, dir_none};
            return true;
        case event_type::xfer_post_time:
            out = {role::post_time, dir_none};
            return true;
        default:
            return false;
    }
}

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

/// The transfer that adjacent transfer events are being gathered into.
class transfer_gatherer {
  public:
    /// Whether `p` can join the transfer gathered so far (its role not seen yet, its direction
    /// not another).
    bool fits(transfer_part p) const noexcept {
        if ((seen_ & bit(p.what)) != 0) {
            return false;
        }
        return p.dir == dir_none || dir_ == dir_none || p.dir == dir_;
    }

    void add(transfer_part p, std::uint64_t value) noexcept {
        seen_ |= bit(p.what);
        if (p.dir != dir_none) {
            dir_ = p.dir;
        }
        values_[static_cast<std::size_t>(p.what)] = value;
    }

    /// Hands on the gathered transfer, if any, and starts the next.
    void finish(std::uint64_t now_us, std::vector<transfer_record>& out) {
        if (seen_ == 0) {
            return;
        }
        transfer_record& r = out.emplace_back();
        r.timestamp_us = now_us;
        r.bytes = value(role::bytes);
        r.requests = value(role::requests);
        r.xfer_us = value(role::xfer_time);
        r.post_us = value(role::post_time);
        // Without TX/RX events (NIXL_TELEMETRY_ENABLED_METRICS left them out) the direction is
        // not known: counted as tx.
        r.dir = dir_ == dir_code(direction::rx) ? direction::rx : direction::tx;
        // NIXL counts TX for the transfers an agent writes and RX for those it reads.
        r.attrs.op = r.dir == direction::tx ? transfer_op::write : transfer_op::read;
        // Requests are NIXL's REQUESTS_NUM events, exactly: none when they were left out. The
        // latency histograms observe a record whose transfer time NIXL gave.
        r.timed = (seen_ & bit(role::xfer_time)) != 0;
        seen_ = 0;
        dir_ = dir_none;
        values_ = {};
    }

  private:
    static constexpr std::uint8_t bit(role r) noexcept {
        return static_cast<std::uint8_t>(1u << static_cast<unsigned>(r));
    }
    std::uint64_t value(role r) const noexcept { return values_[static_cast<std::size_t>(r)]; }

    std::uint8_t seen_ = 0;  ///< a bit for each role seen
    std::uint8_t dir_ = dir_none;
    std::array<std::uint64_t, 4> values_{};
};

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

void map_flush(std::span<const abi_v2::event> in, std::uint64_t now_us, mapped_flush& out) {
    transfer_gatherer transfer;
    for (const abi_v2::event& e : in) {
        if (transfer_part part{}; part_of(e.type, part)) {
            if (!transfer.fits(part)) {
                transfer.finish(now_us, out.transfers);
            }
            transfer.add(part, e.value);
            continue;
        }
        transfer.finish(now_us, out.transfers);
        if (const auto mapped = single_event(e, now_us)) {
            out.events.push_back(*mapped);
        } else {
            out.events.push_back(unmapped_event(e, now_us));
            ++out.unmapped;
        }
    }
    transfer.finish(now_us, out.transfers);
}

}  // namespace xtel::nixl
