#pragma once
/// NIXL's events, one flush of them, as xtel's pipeline takes them: whole transfers where
/// NIXL's events of one transfer arrive together, events for the rest.
///
/// A completed transfer is up to four NIXL events pushed together (XFER_POST_TIME, XFER_TIME,
/// TX_BYTES or RX_BYTES, TX_REQUESTS_NUM or RX_REQUESTS_NUM in NIXL 1.5.1; each only when
/// NIXL_TELEMETRY_ENABLED_METRICS keeps it), which NIXL's staging queue keeps adjacent. A run of
/// adjacent transfer events in which no role repeats and the direction agrees is one transfer:
/// the metric model's transfer families (bytes, requests, the latency histograms) are made from
/// transfer records, never from loose byte events. Bytes and requests are NIXL's, exactly,
/// however the events are grouped; the histograms are right when a transfer's events come in one
/// flush (NIXL 1.5: a NIXL without batch hooks hands each event alone, and a transfer's times
/// then reach the histograms apart from its bytes). NIXL's events carry no time: each is stamped
/// with the flush's.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "nixl/transfer_tallies.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/nixl/abi_v2.hpp"

namespace xtel::nixl {

/// One flush's events in xtel's form.
struct mapped_flush {
    std::vector<event> events;
    /// The transfers not summed in `tallies`: all of them while the tallies are off.
    std::vector<transfer_record> transfers;
    /// The completed transfers summed by direction, once configured (flush_tallies::configure):
    /// those that cannot become spans.
    flush_tallies tallies;
    /// Events of a kind xtel's model has no name for (five of NIXL's twelve error kinds: not
    /// posted, mismatch, repost active, unknown, no telemetry) or of a type NIXL does not
    /// define. Each is in `events` too, as a names::nixl_unmapped_prefix counter, so that
    /// xtel_nixl_events_unmapped_total{type} serves them.
    std::uint64_t unmapped = 0;

    void clear() noexcept {
        events.clear();
        transfers.clear();
        tallies.clear();
        unmapped = 0;
    }
};

namespace mapping_detail {

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

/// The part of a transfer an event of type `t` is; false when it is none. What part_of answers,
/// at compile time.
constexpr bool part_by_type(abi_v2::event_type t, transfer_part& out) noexcept {
    switch (t) {
        case abi_v2::event_type::tx_bytes:
            out = {role::bytes, dir_code(direction::tx)};
            return true;
        case abi_v2::event_type::rx_bytes:
            out = {role::bytes, dir_code(direction::rx)};
            return true;
        case abi_v2::event_type::tx_requests_num:
            out = {role::requests, dir_code(direction::tx)};
            return true;
        case abi_v2::event_type::rx_requests_num:
            out = {role::requests, dir_code(direction::rx)};
            return true;
        case abi_v2::event_type::xfer_time:
            out = {role::xfer_time, dir_none};
            return true;
        case abi_v2::event_type::xfer_post_time:
            out = {role::post_time, dir_none};
            return true;
        default:
            return false;
    }
}

/// part_by_type's answers for the types below 8, among which are all the transfer types: one
/// load and compare an event instead of the switch's indirect jump.
struct part_slot {
    transfer_part part{};
    bool is = false;
};
inline constexpr std::array<part_slot, 8> part_slots = [] {
    std::array<part_slot, 8> out{};
    for (std::uint32_t t = 0; t < out.size(); ++t) {
        out[t].is = part_by_type(static_cast<abi_v2::event_type>(t), out[t].part);
    }
    return out;
}();
static_assert(
    [] {
        transfer_part p{};
        for (std::uint32_t t = part_slots.size(); t <= abi_v2::event_type_count; ++t) {
            if (part_by_type(static_cast<abi_v2::event_type>(t), p)) {
                return false;
            }
        }
        return true;
    }(),
    "every transfer event type is below part_slots.size()");

/// The part of a transfer an event of type `t` is; false when it is none.
constexpr bool part_of(abi_v2::event_type t, transfer_part& out) noexcept {
    const auto i = static_cast<std::uint32_t>(t);
    if (i >= part_slots.size() || !part_slots[i].is) {
        return false;
    }
    out = part_slots[i].part;
    return true;
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

    /// NIXL's events gathered into the transfer so far.
    std::size_t gathered() const noexcept { return static_cast<std::size_t>(std::popcount(seen_)); }

    /// Hands on the gathered transfer, if any, and starts the next: summed in the flush's
    /// tallies when they take it, else as a record.
    void finish(std::uint64_t now_us, mapped_flush& out) {
        if (seen_ == 0) {
            return;
        }
        // Without TX/RX events (NIXL_TELEMETRY_ENABLED_METRICS left them out) the direction is
        // not known: counted as tx.
        const direction d = dir_ == dir_code(direction::rx) ? direction::rx : direction::tx;
        // The latency histograms observe a transfer whose transfer time NIXL gave.
        const bool timed = (seen_ & bit(role::xfer_time)) != 0;
        bool head_sampled = false;
        if (out.tallies.take(d, value(role::bytes), value(role::requests), timed,
                             value(role::post_time), value(role::xfer_time), head_sampled)) {
            reset();
            return;
        }
        // Built whole, every field named, rather than emplaced and then set: an emplaced record
        // is first zeroed, which g++ does with `rep stos`, a quarter of this exporter's time an
        // event (BM_nixl_flush_paired/4096).
        out.transfers.push_back(transfer_record{
            .timestamp_us = now_us,
            .bytes = value(role::bytes),
            // Requests are NIXL's REQUESTS_NUM events, exactly: none when they were left out.
            .requests = value(role::requests),
            .post_us = value(role::post_time),
            .xfer_us = value(role::xfer_time),
            .dir = d,
            // NIXL counts TX for the transfers an agent writes and RX for those it reads.
            .attrs = {.op = d == direction::tx ? transfer_op::write : transfer_op::read},
            .timed = timed,
            .notified = false,
            .shape = {},
            .request_id = {},
            .head_sampled = head_sampled,
        });
        reset();
    }

  private:
    void reset() noexcept {
        seen_ = 0;
        dir_ = dir_none;
        values_ = {};
    }
    static constexpr std::uint8_t bit(role r) noexcept {
        return static_cast<std::uint8_t>(1u << static_cast<unsigned>(r));
    }
    std::uint64_t value(role r) const noexcept { return values_[static_cast<std::size_t>(r)]; }

    std::uint8_t seen_ = 0;  ///< a bit for each role seen
    std::uint8_t dir_ = dir_none;
    std::array<std::uint64_t, 4> values_{};
};

}  // namespace mapping_detail

/// map_flush an event at a time, as NIXL hands them: xtel's exporter maps each event as it
/// comes, so that a flush's events are never stored and read again. The transfer events' path
/// is inline: it runs for nearly every event on NIXL's flush thread.
class flush_mapper {
  public:
    /// Starts a flush whose records and events are stamped `now_us`.
    void begin(std::uint64_t now_us) noexcept {
        transfer_ = {};
        now_us_ = now_us;
    }

    /// The flush's next event, its xtel form appended to `out` (a transfer's once it is whole).
    /// On an exception (no memory) `e` is lost, and nothing mapped before it.
    void add(const abi_v2::event& e, mapped_flush& out) {
        // Inline only what most events need (three of NIXL 1.5.1's four a transfer), without a
        // call: the rest out of line, so that NIXL's flush thread saves no registers for it.
        if (mapping_detail::transfer_part part{};
            mapping_detail::part_of(e.type, part) && transfer_.fits(part)) [[likely]] {
            transfer_.add(part, e.value);
            return;
        }
        add_ending(e, out);
    }

    /// Ends the flush: the transfer gathered last into `out`. On an exception (no memory) its
    /// events are lost: gathered() says how many.
    void end(mapped_flush& out) { transfer_.finish(now_us_, out); }

    /// NIXL's events of the transfer being gathered, which end() hands on.
    std::size_t gathered() const noexcept { return transfer_.gathered(); }

  private:
    /// An event that ends the transfer gathered so far: one that does not fit it, or one that
    /// is not part of a transfer.
    void add_ending(const abi_v2::event& e, mapped_flush& out);

    mapping_detail::transfer_gatherer transfer_;
    std::uint64_t now_us_ = 0;
};

/// Appends the xtel form of `in`, one flush's NIXL events in NIXL's order, to `out`, every
/// record and event stamped `now_us`.
void map_flush(std::span<const abi_v2::event> in, std::uint64_t now_us, mapped_flush& out);

}  // namespace xtel::nixl
