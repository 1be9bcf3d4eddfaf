#pragma once
/// The expand stage of the back end (back_end.hpp), and what one round holds until it is
/// handed on: the transfer records and events made of a ring's slots (slot_codec.hpp), or
/// taken whole from a producer that has no ring.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/attribute_cache.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/event_batch.hpp"
#include "xtel/core/names.hpp"
#include "xtel/core/ring.hpp"
#include "xtel/core/slot_codec.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel::detail {

/// How many events the back end makes of one transfer for exporters that take events:
/// agent_{tx,rx}_bytes and agent_{tx,rx}_requests_num for a completed transfer, and
/// agent_xfer_time and agent_xfer_post_time besides when its times were measured; none for a
/// failed one. Counted (telemetry_stats::events_exported) even when no exporter takes them.
constexpr std::size_t events_of_transfer(transfer_status status, bool timed) noexcept {
    return status != transfer_status::success ? 0 : timed ? 4 : 2;
}

/// One round's records and events. `Records`: some consumer takes whole transfer records (the
/// model, or an exporter's export_transfers); `Events`: some exporter takes events only, so
/// transfers are also expanded into events. With both, the events not derived from transfers
/// are also kept apart (plain()), for the record takers.
template <bool Records, bool Events>
class round {
  public:
    static constexpr bool splits = Records && Events;

    void reserve(std::size_t events) { batch_.reserve(events); }

    /// Gathers a record's slots (a drain hands them one by one, and never ends inside a record)
    /// and expands the record at its last.
    void take_slot(const staged_record& r, staging_ring& ring) {
        if ((r.flags & slot_flag::continued) == 0) [[likely]] {
            if (group_size_ == 0) [[likely]] {
                const staged_record* one = &r;
                expand(&one, 1, ring);
                return;
            }
            group_[group_size_++] = &r;
            expand(group_.data(), group_size_, ring);
            group_size_ = 0;
            return;
        }
        if (group_size_ == group_.size()) {
            group_size_ = 0;  // longer than any record: not one of ours; start again
        }
        group_[group_size_++] = &r;
    }
    /// After each drain: a drain never ends inside a record, so nothing is left gathered.
    void end_drain() noexcept { group_size_ = 0; }

    /// An event not derived from a transfer record: for every exporter.
    void push_plain(const event& e) {
        batch_.push_back(e);
        if constexpr (splits) {
            plain_.push_back(e);
        }
    }

    /// A whole transfer from a producer without a ring; its request_id is copied.
    void take(const transfer_record& r) {
        if constexpr (Records) {
            transfers_.push_back(r);
            if (!r.request_id.empty()) {
                add_tag(clip_request_id(r.request_id));
            }
        }
        expand_events(r);
    }

    /// The events made so far, those only counted included.
    std::size_t events_made() const noexcept { return batch_.size() + unexpanded_; }

    /// The round's transfer records, their request ids pointing into the round's text: valid
    /// until clear_transfers().
    std::span<const transfer_record> transfers() {
        for (const auto& tag : tags_) {
            transfers_[tag.record].request_id =
                std::string_view(tag_text_).substr(tag.offset, tag.length);
        }
        return {transfers_.data(), transfers_.size()};
    }
    /// Every event, those derived from transfers included.
    const event_batch& events() const noexcept { return batch_; }
    /// The events not derived from transfer records (every event unless `splits`).
    const event_batch& plain() const noexcept { return splits ? plain_ : batch_; }

    void clear_transfers() noexcept {
        transfers_.clear();
        tags_.clear();
        tag_text_.clear();
        last_tag_ring_ = nullptr;
    }
    void clear_events() noexcept {
        batch_.clear();
        plain_.clear();
        unexpanded_ = 0;
    }

  private:
    /// Appends one event of a transfer to the batch, written field by field in place. Built on
    /// the stack and copied, each event cost a store-forwarding stall (its one-byte fields
    /// stored, then read back in 16-byte loads for the copy): 60% of the flusher's drain.
    void push_event(std::uint64_t ts,
                    category cat,
                    const event_name& name,
                    std::uint64_t value,
                    value_kind kind) {
        event& e = batch_.append();
        e.timestamp_us = ts;
        e.value = value;
        e.cat = cat;
        e.kind = kind;
        std::memcpy(&e.name, &name, sizeof name);
    }

    /// The request id of the transfer taken last, kept until the round's records are handed on.
    void add_tag(std::string_view id) {
        tags_.push_back({transfers_.size() - 1, tag_text_.size(), id.size()});
        tag_text_.append(id);
    }

    /// The same when the id is the one `ring` staged last (a
    /// request's blocks): its text is in the round once for a run of them, not once a
    /// transfer. Kept until the round's records are handed on.
    void add_last_tag(staging_ring& ring) {
        const std::string_view id = ring.received_tag().view();
        if (last_tag_ring_ != &ring) {
            last_tag_ring_ = &ring;
            last_tag_at_ = tag_text_.size();
            tag_text_.append(id);
        }
        tags_.push_back({transfers_.size() - 1, last_tag_at_, id.size()});
    }

    /// Expands one record from its `n` slots.
    void expand(const staged_record* const* slots, std::size_t n, staging_ring& ring) {
        const staged_record& r = *slots[0];
        switch (r.kind) {
            case record_kind::event:
                if (n == 2 && slots[1]->kind == record_kind::event_tail) {
                    push_plain(event_layout::read(r, *slots[1]));
                }
                return;
            case record_kind::transfer_tx:
            case record_kind::transfer_rx:
            case record_kind::transfer_notified_tx:
            case record_kind::transfer_notified_rx:
                expand_transfer(slots, n, ring);
                return;
            default:
                return;  // a part without its head: not written by the front end
        }
    }

    /// A staged transfer from its slots (its own, then its extension and its id's two when it
    /// has them) into this round.
    void expand_transfer(const staged_record* const* slots, std::size_t n, staging_ring& ring) {
        const staged_transfer s = transfer_layout::read(*slots[0]);
        attribute_cache& cache = ring.received_attributes();
        // Before the extension's store below, which makes its set the last again.
        const unsigned way = cache.resolve(s.way);
        std::uint64_t requests = s.requests;
        [[maybe_unused]] std::size_t next = 1;
        if (s.extended()) {
            if (n < 2 || slots[1]->kind != record_kind::transfer_ext) {
                return;
            }
            std::uint64_t w[2];
            ext_layout::read(*slots[1], w, requests);
            cache.store(way, w[0], w[1]);
            next = 2;
        }
        const transfer_record record{s.timestamp_us, s.bytes, requests,      s.post_us,
                                     s.xfer_us,      s.dir(), cache.at(way), s.timed(),
                                     s.notified(),   s.shape};
        if constexpr (Records) {
            transfers_.push_back(record);
            if (s.tag_as_last()) {
                add_last_tag(ring);
            } else if (next + 2 == n && slots[next]->kind == record_kind::transfer_tag &&
                       slots[next + 1]->kind == record_kind::tag_tail) {
                const std::size_t at = tag_text_.size();
                tag_layout::read(*slots[next], *slots[next + 1], tag_text_);
                tags_.push_back({transfers_.size() - 1, at, tag_text_.size() - at});
                ring.received_tag().remember(std::string_view(tag_text_).substr(at));
                last_tag_ring_ = &ring;  // the text at `at` begins with what it remembered
                last_tag_at_ = at;
            }
        }
        expand_events(record);
    }

    /// The events of one transfer, for the exporters that take events only: none for another
    /// agent's (notified) transfer or a failed one, as in NIXL.
    void expand_events(const transfer_record& t) {
        if (t.notified) {
            return;  // another agent's transfer: no agent_*_bytes event counts it here
        }
        if constexpr (!Events) {
            // Every exporter takes the record itself: its events are only counted.
            unexpanded_ += events_of_transfer(t.attrs.status, t.timed);
            return;
        }
        if (t.attrs.status != transfer_status::success) {
            return;
        }
        const bool tx = t.dir == direction::tx;
        push_event(t.timestamp_us, category::transfer,
                   tx ? names::agent_tx_bytes : names::agent_rx_bytes, t.bytes,
                   value_kind::counter);
        push_event(t.timestamp_us, category::transfer,
                   tx ? names::agent_tx_requests_num : names::agent_rx_requests_num, t.requests,
                   value_kind::counter);
        if (!t.timed) {
            return;
        }
        push_event(t.timestamp_us, category::performance, names::agent_xfer_time, t.xfer_us,
                   value_kind::sample);
        push_event(t.timestamp_us, category::performance, names::agent_xfer_post_time, t.post_us,
                   value_kind::sample);
    }

    event_batch batch_;
    event_batch plain_;  ///< splits only
    std::vector<transfer_record> transfers_;
    /// Request ids of transfers_ (by index), their text in tag_text_.
    struct tag_span {
        std::size_t record;
        std::size_t offset;
        std::size_t length;
    };
    std::vector<tag_span> tags_;
    std::string tag_text_;
    /// The ring whose last staged id is in tag_text_ at last_tag_at_ (none: not this round).
    const staging_ring* last_tag_ring_ = nullptr;
    std::size_t last_tag_at_ = 0;
    /// The slots of the record take_slot is gathering (at most a transfer, its extension and
    /// its id's two); valid within one drain.
    std::array<const staged_record*, 4> group_{};
    std::size_t group_size_ = 0;
    std::size_t unexpanded_ = 0;  ///< events of transfers that no exporter takes as events
};

}  // namespace xtel::detail
