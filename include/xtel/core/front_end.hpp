#pragma once
/// The recording front end of a pipeline: what a recording thread runs. Each record is a few
/// stores into a ring only that thread writes (ring.hpp), in the slot layouts of
/// slot_codec.hpp: no lock, no allocation, no virtual call and no exporter code. The back end
/// (back_end.hpp), on the flusher thread, drains the rings; this header includes none of it,
/// so the hot path cannot reach the back end's code by accident.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "xtel/core/clock.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/ring.hpp"
#include "xtel/core/slot_codec.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel {

/// The front end of a pipeline. `Enabled` false (telemetry<>) makes every record call nothing;
/// `TakesTransfers` false (no exporter takes transfer records) stages no request id and no
/// notified transfer, which nothing would read.
template <bool Enabled, bool TakesTransfers>
class front_end {
  public:
    /// Rings of `staging_capacity` slots, one per recording thread; `signal` (may be null) is
    /// asked for an early flush when a ring is half full.
    front_end(std::size_t staging_capacity, detail::flush_signal* signal)
        : rings_(staging_capacity, signal) {}

    /// Records one event stamped now.
    void record(category cat,
                const event_name& name,
                std::uint64_t value,
                value_kind kind = value_kind::sample) noexcept {
        if constexpr (Enabled) {
            record_at(clock::now_us(), cat, name, value, kind);
        }
    }

    /// Records one event with a timestamp the caller already holds.
    void record_at(std::uint64_t timestamp_us,
                   category cat,
                   const event_name& name,
                   std::uint64_t value,
                   value_kind kind = value_kind::sample) noexcept {
        if constexpr (Enabled) {
            detail::staging_ring* ring = rings_.local_ring();
            if (ring == nullptr) [[unlikely]] {
                return;  // counted by local_ring
            }
            detail::staged_record* r = ring->try_claim_n(2);
            if (r == nullptr) [[unlikely]] {
                ring->note_drop();
                return;
            }
            detail::event_layout::write(*r, *ring->next_of(r), timestamp_us, value, cat, kind,
                                        name);
            ring->publish_n(2);
        }
    }

    /// Adds to a counter (the event carries the increment).
    void add(category cat, const event_name& name, std::uint64_t delta) noexcept {
        record(cat, name, delta, value_kind::counter);
    }

    /// Sets a gauge (the event carries the level).
    void set(category cat, const event_name& name, std::uint64_t value) noexcept {
        record(cat, name, value, value_kind::gauge);
    }

    /// Records a transfer as one staged record; the flusher hands it whole, with its
    /// attributes, to exporters that ask for transfers, and expands a completed one (status
    /// success) into agent_{tx,rx}_bytes, agent_{tx,rx}_requests_num, agent_xfer_time and
    /// agent_xfer_post_time. A failed one makes no such event: those count completed
    /// transfers, as in NIXL.
    /// A non-empty `request_id` (the caller's request or trace id, cut to max_request_id
    /// bytes) is staged in a second record beside it, and reaches exporters of transfer
    /// records as transfer_record::request_id: two more slots, for tagged transfers only, and
    /// none when it is the id this thread staged last (a request's blocks: tag_cache.hpp).
    /// The record is one 32-byte slot when `attrs` are among the 16 attribute sets this thread
    /// used last (a cache by hash: an agent's transfers share a few) and `requests` fits 16
    /// bits; two slots otherwise. post_us and xfer_us are kept to 2^32 - 1 (71.6 minutes).
    /// PRECONDITION: `attrs` was filled before this call (say, when the transfer was created):
    /// it is read as two 8-byte words.
    /// Returns false when the record was dropped (no room: counted in dropped()), so that a
    /// caller holding what it counts (an agent's transfer slot) can keep it for a later record.
    [[gnu::always_inline]] bool record_transfer(direction dir,
                                                std::uint64_t timestamp_us,
                                                std::uint64_t bytes,
                                                std::uint64_t requests,
                                                std::uint64_t post_us,
                                                std::uint64_t xfer_us,
                                                const transfer_attributes& attrs = no_attributes,
                                                std::string_view request_id = {},
                                                transfer_shape shape = {}) noexcept {
        return stage_transfer(transfer_kind(dir), timestamp_us, bytes, requests, post_us, xfer_us,
                              attrs, detail::slot_flag::timed, request_id, shape);
    }

    /// Records completed transfers whose times were not measured: their bytes and requests
    /// only. Expanded into agent_{tx,rx}_bytes and agent_{tx,rx}_requests_num, with no time
    /// events; handed to transfer exporters with `timed` false.
    /// A non-empty `request_id` is staged beside it as record_transfer's is (a failed
    /// transfer's, so that its span joins its request's trace). False: dropped, as
    /// record_transfer's.
    bool record_transfer_counts(direction dir,
                                std::uint64_t timestamp_us,
                                std::uint64_t bytes,
                                std::uint64_t requests,
                                const transfer_attributes& attrs = no_attributes,
                                std::string_view request_id = {},
                                transfer_shape shape = {}) noexcept {
        return stage_transfer(transfer_kind(dir), timestamp_us, bytes, requests, 0, 0, attrs, 0,
                              request_id, shape);
    }

    /// Records a transfer another agent made into (or from) this agent's memory, told by its
    /// notification: `attrs.remote_agent` is the initiator. It reaches exporters of transfer
    /// records with `notified` set, one completion, not timed, and makes no event: events and
    /// the transfer families count the transfers this agent initiated. A non-empty
    /// `request_id` (the initiator's trace as a traceparent or trace id) is staged beside it.
    /// Nothing when no exporter takes transfer records. Slow path (the target's progress).
    [[gnu::noinline]] void record_notified(std::uint64_t timestamp_us,
                                           std::uint64_t bytes,
                                           const transfer_attributes& attrs,
                                           std::string_view request_id = {}) noexcept {
        if constexpr (TakesTransfers) {
            // As the target sees the bytes: a write came in, a read went out.
            const direction dir = attrs.op == transfer_op::read ? direction::tx : direction::rx;
            stage_transfer(notified_kind(dir), timestamp_us, bytes, 1, 0, 0, attrs, 0, request_id,
                           {});
        }
    }

    /// The rings the back end drains (one per thread that recorded).
    detail::ring_registry& rings() noexcept { return rings_; }
    /// Records dropped for want of room (rings full, or a ring that could not be allocated).
    std::uint64_t dropped() const noexcept { return rings_.dropped(); }

    /// What a transfer recorded without attributes carries (every field "not known").
    static constexpr transfer_attributes no_attributes{};

  private:
    /// The slot kind of a transfer this agent made.
    static constexpr detail::record_kind transfer_kind(direction dir) noexcept {
        return dir == direction::tx ? detail::record_kind::transfer_tx
                                    : detail::record_kind::transfer_rx;
    }
    /// The record kind of a notified transfer: its own kind, so that telling it from the
    /// agent's own transfers costs the hot path no store (transfer_layout::write writes the kind
    /// anyway).
    static constexpr detail::record_kind notified_kind(direction dir) noexcept {
        return dir == direction::tx ? detail::record_kind::transfer_notified_tx
                                    : detail::record_kind::transfer_notified_rx;
    }

    /// Stages a transfer: one slot when `attrs` are those the thread staged last, its requests
    /// fit, it has no request id or the one staged last, and the ring needs no room made (the hot
    /// path: two compares, no hash); else stage_transfer_slow, which makes room or counts the drop.
    /// Forced inline: as a call it spent more on saving registers than on the record. `attrs` by
    /// value: a set the compiler knows (no_attributes, the default) is then compared from a
    /// register it fills once per loop, not loaded every transfer.
    [[gnu::always_inline]] bool stage_transfer(detail::record_kind kind,
                                               std::uint64_t timestamp_us,
                                               std::uint64_t bytes,
                                               std::uint64_t requests,
                                               std::uint64_t post_us,
                                               std::uint64_t xfer_us,
                                               transfer_attributes attrs,
                                               std::uint8_t flags,
                                               std::string_view request_id,
                                               transfer_shape shape) noexcept {
        if constexpr (Enabled) {
            detail::staging_ring* ring = rings_.local_ring();
            if (ring == nullptr) [[unlikely]] {
                return false;  // counted by local_ring
            }
            const detail::attribute_cache& sent = ring->sent_attributes();
            // Untagged (an id the compiler knows is empty: the default) costs no test here.
            const bool tagged = TakesTransfers && !request_id.empty();
            std::uint64_t head;
            const bool same = tagged
                                  ? detail::same_tag_and_attributes(
                                        ring->sent_tag(), clip_request_id(request_id), sent, &attrs)
                                  : sent.is_last(&attrs);
            // The slow path as the unlikely branch, so that the slot's write falls through: as
            // the else of a likely branch, GCC 12 laid the call out between the compares and
            // the write, and a tagged record jumped twice more.
            if (!same || requests > detail::slot_layout::max_requests || !ring->claim_fast(head))
                [[unlikely]] {
                std::uint64_t w[2];
                std::memcpy(w, &attrs, sizeof w);
                return stage_transfer_slow(*ring, kind, timestamp_us, bytes, requests, post_us,
                                           xfer_us, w[0], w[1], flags,
                                           TakesTransfers ? request_id : std::string_view{}, shape);
            }
            detail::transfer_layout::write(ring->slot_at(head), kind, timestamp_us, bytes, requests,
                                           post_us, xfer_us,
                                           tagged ? flags | detail::slot_flag::tag_as_last : flags,
                                           detail::attribute_cache::same_as_last, shape);
            ring->publish_claimed(head);
        }
        return true;
    }

    /// A transfer whose attributes are not the last: one slot when the cache holds them at
    /// their way, else with them (a transfer_ext slot, which also stores them at their way on
    /// both sides), as when its requests do not fit 16 bits; and
    /// its request id in two more slots when it has one; published together. Without room for
    /// the id, the transfer alone, which loses only its id; without room for that, a counted
    /// drop.
    [[gnu::noinline]] bool stage_transfer_slow(detail::staging_ring& ring,
                                               detail::record_kind kind,
                                               std::uint64_t timestamp_us,
                                               std::uint64_t bytes,
                                               std::uint64_t requests,
                                               std::uint64_t post_us,
                                               std::uint64_t xfer_us,
                                               std::uint64_t w0,
                                               std::uint64_t w1,
                                               std::uint8_t flags,
                                               std::string_view request_id,
                                               transfer_shape shape) noexcept {
        using detail::slot_flag;
        const unsigned way = detail::attribute_cache::way_of(w0, w1);
        detail::attribute_cache& sent = ring.sent_attributes();
        const bool found = sent.holds(way, w0, w1);
        const bool extended = requests > detail::slot_layout::max_requests || !found;
        const std::size_t own = extended ? 2 : 1;
        const std::string_view id = clip_request_id(request_id);
        bool tagged = !id.empty();
        if (tagged && ring.sent_tag().is_last(id)) {
            flags |= slot_flag::tag_as_last;  // the consumer has it: no id slots
            tagged = false;
        }
        detail::staged_record* r = tagged ? ring.try_claim_n(own + 2) : nullptr;
        if (r == nullptr) {
            tagged = false;
            r = ring.try_claim_n(own);
        }
        if (r == nullptr) {
            ring.note_drop();
            return false;
        }
        if (extended) {
            flags |= slot_flag::extended | slot_flag::continued;
        } else if (tagged) {
            flags |= slot_flag::continued;
        }
        detail::transfer_layout::write(*r, kind, timestamp_us, bytes, requests, post_us, xfer_us,
                                       flags, way, shape);
        // The slot names the way: the set there becomes the last on both sides.
        detail::staged_record* last = r;
        if (extended) {
            detail::staged_record* x = ring.next_of(r);
            detail::ext_layout::write(*x, w0, w1, requests, tagged);
            sent.store(way, w0, w1);
            last = x;
        } else {
            sent.remember(way);
        }
        if (tagged) {
            detail::staged_record* h = ring.next_of(last);
            detail::tag_layout::write(*h, *ring.next_of(h), id);
            ring.sent_tag().remember(id);  // with a slot that will be published
        }
        ring.publish_n(own + (tagged ? 2 : 0));
        return true;
    }

    detail::ring_registry rings_;
};

}  // namespace xtel
