#pragma once
/// The slot codec of the recording front end: the 32-byte slot a staging ring holds
/// (ring.hpp), and for every kind of record, the transfer's included, how it is written into
/// its slots and read back out of them. The recording thread writes; the back end
/// (back_end.hpp) reads. Both sides of a layout are here, side by side, so that a change to one
/// is a change to the other.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "xtel/core/event.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel::detail {

enum class record_kind : std::uint8_t {
    /// An event's first slot: timestamp, value, category, value kind and the name's first
    /// bytes; an event_tail slot follows with the rest of the name.
    event = 0,
    /// A completed transmit or receive: one slot when its attributes are in the ring's
    /// attribute cache and its requests fit 16 bits, else followed by a transfer_ext slot.
    /// Expanded into up to four events at flush time.
    transfer_tx = 1,
    transfer_rx = 2,
    /// The first slot of the request id of the transfer before it (the last slot of whose
    /// group is `continued`); a tag_tail slot follows with the rest of the id.
    transfer_tag = 3,
    /// A transfer another agent made and notified this one of (transfer_record::notified),
    /// as this agent sees it: sent (a read of its memory) or received (a write into it).
    transfer_notified_tx = 4,
    transfer_notified_rx = 5,
    /// What a transfer's slot could not hold: its attributes, which the consumer also keeps in
    /// its copy of the attribute cache, and its request count.
    transfer_ext = 6,
    event_tail = 7,
    tag_tail = 8,
};

/// The bits of staged_record::flags.
struct slot_flag {
    /// The next slot belongs to the same record (an event's or an id's tail, a transfer's
    /// extension or id). A record's slots are published together and drained together.
    static constexpr std::uint8_t continued = 1;
    /// Transfers: post_us and xfer_us were measured (see record_transfer_counts).
    static constexpr std::uint8_t timed = 2;
    /// Transfers: a transfer_ext slot follows.
    static constexpr std::uint8_t extended = 4;
    /// Transfers: its request id is the one its ring staged last (tag_cache.hpp); no id slots
    /// follow.
    static constexpr std::uint8_t tag_as_last = 8;
};

/// One staging slot: 32 bytes, two to a cache line. A transfer whose attributes the ring's
/// attribute cache holds (the common case: an agent's transfers share a few attribute sets;
/// checked with two compares when they are the thread's last) is one slot, so that the hot path
/// writes half a line per transfer; events, request ids and the other transfers take two slots or
/// more, published together. Every slot keeps its kind and flags at the same offsets, so that a
/// drain can tell where a record ends without knowing its kind; the other 30 bytes are the kind's.
///
/// A transfer's slot: timestamp_us, value (the bytes), kind, flags, then (bytes 18 to 31) the
/// shape (descriptors, 16 bits little-endian, then lanes), the attribute cache way (or
/// attribute_cache::same_as_last), the requests (16 bits; in the transfer_ext slot when more),
/// post_us and xfer_us (32 bits each, saturated: 2^32 - 1 microseconds, 71.6 minutes, reads as
/// that).
struct alignas(32) staged_record {
    std::uint64_t timestamp_us;
    std::uint64_t value;  ///< event value, or transfer bytes
    record_kind kind;
    std::uint8_t flags;  ///< slot_flag bits
    unsigned char body[14];
};
static_assert(sizeof(staged_record) == 32);

/// Where a slot's bytes are, for the kinds that lay them out by hand.
struct slot_layout {
    static constexpr std::size_t head = offsetof(staged_record, kind);  // bytes 0 to 15
    static constexpr std::size_t body = offsetof(staged_record, body);  // bytes 18 to 31
    static constexpr std::size_t body_size = sizeof(staged_record) - body;
    // A transfer's slot, by offset in the slot.
    static constexpr std::size_t shape = body;         // 3 bytes
    static constexpr std::size_t way = body + 3;       // 1 byte
    static constexpr std::size_t requests = body + 4;  // 2 bytes
    static constexpr std::size_t times = body + 6;     // post_us, xfer_us: 4 bytes each
    static constexpr std::uint64_t max_requests = 0xffff;
    static constexpr std::uint64_t max_time_us = 0xffffffff;

    /// Copies up to `n` bytes of `from` into the slot's free bytes: its 16 head bytes, then
    /// its body from byte `skip` on (kind and flags are the caller's); returns how many.
    static std::size_t put(staged_record& r,
                           std::size_t skip,
                           const unsigned char* from,
                           std::size_t n) noexcept {
        auto* bytes = reinterpret_cast<unsigned char*>(&r);
        const std::size_t first = n < head ? n : head;
        std::memcpy(bytes, from, first);
        const std::size_t room = body_size - skip;
        const std::size_t second = n - first < room ? n - first : room;
        std::memcpy(bytes + body + skip, from + first, second);
        return first + second;
    }
    /// The reverse of put: appends up to `n` of the slot's bytes to `to`; returns how many.
    static std::size_t get(const staged_record& r,
                           std::size_t skip,
                           unsigned char* to,
                           std::size_t n) noexcept {
        const auto* bytes = reinterpret_cast<const unsigned char*>(&r);
        const std::size_t first = n < head ? n : head;
        std::memcpy(to, bytes, first);
        const std::size_t room = body_size - skip;
        const std::size_t second = n - first < room ? n - first : room;
        std::memcpy(to + first, bytes + body + skip, second);
        return first + second;
    }
};

/// A transfer's first slot as the back end reads it (transfer_layout::read).
struct staged_transfer {
    std::uint64_t timestamp_us = 0;
    std::uint64_t bytes = 0;
    /// At most slot_layout::max_requests; a transfer_ext slot carries more.
    std::uint64_t requests = 0;
    std::uint64_t post_us = 0;
    std::uint64_t xfer_us = 0;
    record_kind kind = record_kind::transfer_tx;
    std::uint8_t flags = 0;
    /// The attribute cache way byte (attribute_cache::resolve reads it).
    unsigned char way = 0;
    transfer_shape shape{};

    bool timed() const noexcept { return (flags & slot_flag::timed) != 0; }
    bool extended() const noexcept { return (flags & slot_flag::extended) != 0; }
    bool tag_as_last() const noexcept { return (flags & slot_flag::tag_as_last) != 0; }
    bool notified() const noexcept {
        return kind == record_kind::transfer_notified_tx ||
               kind == record_kind::transfer_notified_rx;
    }
    direction dir() const noexcept {
        return kind == record_kind::transfer_tx || kind == record_kind::transfer_notified_tx
                   ? direction::tx
                   : direction::rx;
    }
};

/// A transfer's first slot (transfer_tx, transfer_rx, transfer_notified_*), laid out as
/// staged_record says: written with four 8-byte stores on the hot path, read back by the back
/// end into a staged_transfer.
struct transfer_layout {
    /// Writes the slot. `way` is the attribute cache way byte (0 to 15, or
    /// attribute_cache::same_as_last); requests above max_requests are saturated here and
    /// carried whole by the transfer_ext slot that must follow.
    static void write(staged_record& r,
                      record_kind kind,
                      std::uint64_t timestamp_us,
                      std::uint64_t bytes,
                      std::uint64_t requests,
                      std::uint64_t post_us,
                      std::uint64_t xfer_us,
                      std::uint8_t flags,
                      unsigned way,
                      transfer_shape shape) noexcept {
        using layout = slot_layout;
        r.timestamp_us = timestamp_us;
        r.value = bytes;
        const std::uint64_t req = requests < layout::max_requests ? requests : layout::max_requests;
        if constexpr (std::endian::native == std::endian::little) {
            // kind, flags, shape, way and requests as one store, made in a register.
            const std::uint64_t head =
                std::uint64_t{static_cast<std::uint8_t>(kind)} | std::uint64_t{flags} << 8 |
                std::uint64_t{shape.descriptors} << 16 | std::uint64_t{shape.lanes} << 32 |
                std::uint64_t{way} << 40 | req << 48;
            std::memcpy(reinterpret_cast<unsigned char*>(&r) + layout::head, &head, sizeof head);
        } else {
            r.kind = kind;
            r.flags = flags;
            r.body[0] = static_cast<unsigned char>(shape.descriptors);
            r.body[1] = static_cast<unsigned char>(shape.descriptors >> 8);
            r.body[2] = shape.lanes;
            r.body[3] = static_cast<unsigned char>(way);
            r.body[4] = static_cast<unsigned char>(req);
            r.body[5] = static_cast<unsigned char>(req >> 8);
        }
        // Written and read back as one word, so the same on either byte order.
        const std::uint64_t times =
            (post_us < layout::max_time_us ? post_us : layout::max_time_us) |
            (xfer_us < layout::max_time_us ? xfer_us : layout::max_time_us) << 32;
        std::memcpy(reinterpret_cast<unsigned char*>(&r) + layout::times, &times, sizeof times);
    }

    static staged_transfer read(const staged_record& r) noexcept {
        using layout = slot_layout;
        const auto* bytes = reinterpret_cast<const unsigned char*>(&r);
        staged_transfer t;
        t.timestamp_us = r.timestamp_us;
        t.bytes = r.value;
        t.kind = r.kind;
        t.flags = r.flags;
        t.way = bytes[layout::way];
        t.requests = std::uint64_t{bytes[layout::requests]} |
                     std::uint64_t{bytes[layout::requests + 1]} << 8;
        std::uint64_t times;
        std::memcpy(&times, bytes + layout::times, sizeof times);
        t.post_us = times & layout::max_time_us;
        t.xfer_us = times >> 32;
        t.shape.descriptors =
            static_cast<std::uint16_t>(bytes[layout::shape] | bytes[layout::shape + 1] << 8);
        t.shape.lanes = bytes[layout::shape + 2];
        return t;
    }
};

/// An event in two slots: the head keeps category and value kind in its first two body bytes
/// and the name's first 12 bytes in the rest; the tail keeps the other 26 (its head bytes and
/// 10 of its body's).
struct event_layout {
    static constexpr std::size_t head_name = slot_layout::body_size - 2;  // 12
    static_assert(head_name + slot_layout::head + slot_layout::body_size >= sizeof(event_name));

    static void write(staged_record& head,
                      staged_record& tail,
                      std::uint64_t timestamp_us,
                      std::uint64_t value,
                      category cat,
                      value_kind vkind,
                      const event_name& name) noexcept {
        const auto* bytes = reinterpret_cast<const unsigned char*>(&name);
        head.timestamp_us = timestamp_us;
        head.value = value;
        head.kind = record_kind::event;
        head.flags = slot_flag::continued;
        head.body[0] = static_cast<unsigned char>(cat);
        head.body[1] = static_cast<unsigned char>(vkind);
        std::memcpy(head.body + 2, bytes, head_name);
        slot_layout::put(tail, 0, bytes + head_name, sizeof(event_name) - head_name);
        tail.kind = record_kind::event_tail;
        tail.flags = 0;
    }
    static event read(const staged_record& head, const staged_record& tail) noexcept {
        event e;
        e.timestamp_us = head.timestamp_us;
        e.value = head.value;
        e.cat = static_cast<category>(head.body[0]);
        e.kind = static_cast<value_kind>(head.body[1]);
        auto* bytes = reinterpret_cast<unsigned char*>(&e.name);
        std::memcpy(bytes, head.body + 2, head_name);
        slot_layout::get(tail, 0, bytes + head_name, sizeof(event_name) - head_name);
        return e;
    }
};

/// A request id in two slots: its length in the head's first body byte, its bytes in every
/// other free byte of the head and then of the tail (59 in all).
struct tag_layout {
    static constexpr std::size_t head_room = slot_layout::head + slot_layout::body_size - 1;
    static constexpr std::size_t tail_room = slot_layout::head + slot_layout::body_size;
    static constexpr std::size_t capacity = head_room + tail_room;

    static void write(staged_record& head, staged_record& tail, std::string_view id) noexcept {
        const std::size_t n = id.size() < max_request_id ? id.size() : max_request_id;
        const auto* bytes = reinterpret_cast<const unsigned char*>(id.data());
        const std::size_t first = slot_layout::put(head, 1, bytes, n);
        slot_layout::put(tail, 0, bytes + first, n - first);
        head.kind = record_kind::transfer_tag;
        head.flags = slot_flag::continued;
        head.body[0] = static_cast<unsigned char>(n);
        tail.kind = record_kind::tag_tail;
        tail.flags = 0;
    }
    /// Appends the id to `out`.
    static void read(const staged_record& head, const staged_record& tail, std::string& out) {
        unsigned char bytes[capacity];
        std::size_t n = head.body[0];
        n = n < max_request_id ? n : max_request_id;
        const std::size_t first = slot_layout::get(head, 1, bytes, n);
        slot_layout::get(tail, 0, bytes + first, n - first);
        out.append(reinterpret_cast<const char*>(bytes), n);
    }
};
static_assert(tag_layout::capacity >= max_request_id);

/// A transfer's extension slot (transfer_ext), what its own slot could not hold: the two words
/// of its attribute set in the head bytes and its request count, at full width, in the bytes a
/// transfer's slot keeps its times in.
struct ext_layout {
    static_assert(slot_layout::times + sizeof(std::uint64_t) == sizeof(staged_record));

    static void write(staged_record& x,
                      std::uint64_t w0,
                      std::uint64_t w1,
                      std::uint64_t requests,
                      bool continued) noexcept {
        auto* bytes = reinterpret_cast<unsigned char*>(&x);
        std::memcpy(bytes, &w0, sizeof w0);
        std::memcpy(bytes + sizeof w0, &w1, sizeof w1);
        std::memcpy(bytes + slot_layout::times, &requests, sizeof requests);
        x.kind = record_kind::transfer_ext;
        x.flags = continued ? slot_flag::continued : 0;
    }
    static void read(const staged_record& x,
                     std::uint64_t (&w)[2],
                     std::uint64_t& requests) noexcept {
        const auto* bytes = reinterpret_cast<const unsigned char*>(&x);
        std::memcpy(w, bytes, sizeof w);
        std::memcpy(&requests, bytes + slot_layout::times, sizeof requests);
    }
};

}  // namespace xtel::detail
