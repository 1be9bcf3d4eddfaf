#include "nixl/event_mapping.hpp"

#include <array>
#include <cstddef>
#include <optional>

#include "xtel/core/names.hpp"
#include "xtel/core/status.hpp"

namespace xtel::nixl {

namespace {

using abi_v2::event_type;

/// What a transfer event tells of its transfer.
enum class role : std::uint8_t { bytes, requests, xfer_time, post_time };

struct transfer_part {
    role what;
    /// The direction the event names; nullopt for the times, which name none.
    std::optional<direction> dir;
};

std::optional<transfer_part> part_of(event_type t) noexcept {
    switch (t) {
        case event_type::tx_bytes:
            return transfer_part{role::bytes, direction::tx};
        case event_type::rx_bytes:
            return transfer_part{role::bytes, direction::rx};
        case event_type::tx_requests_num:
            return transfer_part{role::requests, direction::tx};
        case event_type::rx_requests_num:
            return transfer_part{role::requests, direction::rx};
        case event_type::xfer_time:
            return transfer_part{role::xfer_time, std::nullopt};
        case event_type::xfer_post_time:
            return transfer_part{role::post_time, std::nullopt};
        default:
            return std::nullopt;
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
    bool fits(const transfer_part& p) const noexcept {
        if (seen_[static_cast<std::size_t>(p.what)]) {
            return false;
        }
        return !p.dir || !dir_ || *p.dir == *dir_;
    }

    void add(const transfer_part& p, std::uint64_t value) noexcept {
        seen_[static_cast<std::size_t>(p.what)] = true;
        ++parts_;
        if (p.dir) {
            dir_ = p.dir;
        }
        switch (p.what) {
            case role::bytes:
                record_.bytes = value;
                break;
            case role::requests:
                record_.requests = value;
                break;
            case role::xfer_time:
                record_.xfer_us = value;
                break;
            case role::post_time:
                record_.post_us = value;
                break;
        }
    }

    /// Hands on the gathered transfer, if any, and starts the next.
    void finish(std::uint64_t now_us, std::vector<transfer_record>& out) {
        if (parts_ == 0) {
            return;
        }
        const auto seen = [this](role r) { return seen_[static_cast<std::size_t>(r)]; };
        record_.timestamp_us = now_us;
        // Without TX/RX events (NIXL_TELEMETRY_ENABLED_METRICS left them out) the direction is
        // not known: counted as tx.
        record_.dir = dir_.value_or(direction::tx);
        // NIXL counts TX for the transfers an agent writes and RX for those it reads.
        record_.attrs.op = record_.dir == direction::tx ? transfer_op::write : transfer_op::read;
        // Requests are NIXL's REQUESTS_NUM events, exactly: none when they were left out. The
        // latency histograms observe a record whose transfer time NIXL gave.
        record_.timed = seen(role::xfer_time);
        out.push_back(record_);
        *this = transfer_gatherer{};
    }

  private:
    std::array<bool, 4> seen_{};
    std::size_t parts_ = 0;
    std::optional<direction> dir_;
    transfer_record record_{};
};

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
        if (const auto part = part_of(e.type)) {
            if (!transfer.fits(*part)) {
                transfer.finish(now_us, out.transfers);
            }
            transfer.add(*part, e.value);
            continue;
        }
        transfer.finish(now_us, out.transfers);
        if (const auto mapped = single_event(e, now_us)) {
            out.events.push_back(*mapped);
        } else {
            ++out.unmapped;
        }
    }
    transfer.finish(now_us, out.transfers);
}

}  // namespace xtel::nixl
