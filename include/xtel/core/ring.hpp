#pragma once
/// Per-thread staging: each recording thread owns a single-producer, single-consumer ring of
/// 32-byte slots; the flusher thread is the only consumer. Nothing here is shared between
/// two recording threads, so recording takes no lock and touches no other thread's lines.

#include <atomic>
#include <bit>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "xtel/core/cache_line.hpp"
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

/// Both sides' copy of a ring's transfer attribute cache: 16 attribute sets, each at the way
/// attribute_way gives it, and the set staged last. A transfer whose attributes are the last
/// set is staged in one slot that says so (same_as_last: no way to load on the hot path); one
/// whose attributes are at their way in the producer's copy, in one slot that names the way;
/// any other with its attributes, which both sides then store at that way. A slot that names a
/// way makes it the last. The consumer reads the slots in the order they were written, so its
/// copy is the producer's as of the slot it reads: the producer changes its copy only for a
/// slot it has claimed, and so will publish. Both start all "not known", the last at way 0.
struct attribute_cache {
    static constexpr std::size_t ways = 16;
    /// A slot's way byte for "the set staged last"; 0 to 15 name a way.
    static constexpr unsigned same_as_last = 0x10;
    /// The last set, so that a run of transfers with the same attributes (an agent's usual
    /// case) is checked with one compare and no hash, and its way.
    alignas(16) std::uint64_t last[2] = {};
    unsigned last_way = 0;
    std::uint64_t words[ways][2] = {};

    static constexpr unsigned way_of(std::uint64_t w0, std::uint64_t w1) noexcept {
        // Folded first: the peer's label id is in w0's high half, which a multiply alone
        // would mostly shift out of the top bits.
        std::uint64_t h = w0 ^ std::rotl(w1, 29);
        h ^= h >> 32;
        return static_cast<unsigned>((h * 0x9e3779b97f4a7c15ULL) >> 60);
    }
    /// Whether `attrs` (16 bytes) are the set staged last. One 16-byte compare where SSE2 has
    /// it: three operations where two 8-byte compares take five.
    bool is_last(const void* attrs) const noexcept {
#if defined(__SSE2__)
        const __m128i a = _mm_loadu_si128(static_cast<const __m128i*>(attrs));
        const __m128i l = _mm_load_si128(reinterpret_cast<const __m128i*>(last));
        return _mm_movemask_epi8(_mm_cmpeq_epi8(a, l)) == 0xffff;
#else
        std::uint64_t w[2];
        std::memcpy(w, attrs, sizeof w);
        return last[0] == w[0] && last[1] == w[1];
#endif
    }
    /// A slot's way byte where a transfer slot's head word carries it.
    static constexpr std::uint64_t way_bits(unsigned way) noexcept {
        return std::uint64_t{way} << 40;
    }
    /// Whether `way` holds the set. Changes nothing: the producer asks before it has a slot.
    bool holds(unsigned way, std::uint64_t w0, std::uint64_t w1) const noexcept {
        return words[way][0] == w0 && words[way][1] == w1;
    }
    /// The set at `way` becomes the last.
    void remember(unsigned way) noexcept {
        last[0] = words[way][0];
        last[1] = words[way][1];
        last_way = way;
    }
    void store(unsigned way, std::uint64_t w0, std::uint64_t w1) noexcept {
        words[way][0] = w0;
        words[way][1] = w1;
        remember(way);
    }
    /// The consumer's side: the way a slot's way byte means, which becomes the last when the
    /// byte names it.
    unsigned resolve(unsigned char way_byte) noexcept {
        if ((way_byte & same_as_last) == 0) {
            remember(way_byte & (ways - 1));
        }
        return last_way;
    }
    transfer_attributes at(unsigned way) const noexcept {
        transfer_attributes a;
        std::memcpy(&a, words[way & (ways - 1)], sizeof a);
        return a;
    }
};
static_assert(attribute_cache::way_of(0, 0) == 0);
static_assert(sizeof(transfer_attributes) == 2 * sizeof(std::uint64_t));

/// How a ring that is filling up asks its pipeline's flusher to run before its interval ends.
/// Lock-free on the recording side: a flag and a notify without the mutex. A wake-up that
/// races with the flusher going to sleep can be lost, and is not sent again while the flag
/// stays set; the sleeping flusher looks at the flag at least every 50 ms (telemetry.hpp's
/// run_flusher), so a lost wake-up delays the flush by that, not by a whole interval.
class flush_signal {
  public:
    explicit flush_signal(std::condition_variable& cv) noexcept : cv_(cv) {}

    void request() noexcept {
        if (!requested_.exchange(true, std::memory_order_acq_rel)) {
            cv_.notify_one();
        }
    }
    /// The flusher's side: true once per request.
    bool take() noexcept { return requested_.exchange(false, std::memory_order_acq_rel); }
    bool pending() const noexcept { return requested_.load(std::memory_order_acquire); }

  private:
    std::atomic<bool> requested_{false};
    std::condition_variable& cv_;
};

/// Single-producer, single-consumer ring. PRECONDITION: only the owning thread calls
/// try_claim/publish/note_drop; only one consumer at a time calls drain.
class staging_ring {
  public:
    /// `capacity` is rounded up to a power of two; `signal` (may be null) is asked for an early
    /// flush when the ring is half full.
    explicit staging_ring(std::size_t capacity, flush_signal* signal = nullptr);

    staging_ring(const staging_ring&) = delete;
    staging_ring& operator=(const staging_ring&) = delete;

    /// The slot for the next record, or nullptr when the ring is full (the caller counts the
    /// drop). One compare on the fast path: the consumer's index is read only at a check mark,
    /// which is never beyond the point where the ring would be full.
    staged_record* try_claim() noexcept {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);  // only writer
        if (head >= check_mark_) [[unlikely]] {
            if (!make_room(head)) {
                return nullptr;
            }
        }
        return &slots_[head & mask_];
    }

    /// Makes the claimed record visible to the consumer.
    void publish() noexcept {
        head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }

    /// The hot path's claim: true when the next slot needs no room made for it first, else
    /// false, and the caller's slow path calls try_claim (which makes room, or says the ring is
    /// full). `head` is the slot's index, for slot_at and publish_claimed. A flag and an index,
    /// not a pointer: a null test of the slot's address would stay on the hot path.
    bool claim_fast(std::uint64_t& head) const noexcept {
        head = head_.load(std::memory_order_relaxed);  // only writer
        return head < check_mark_;
    }
    staged_record& slot_at(std::uint64_t head) noexcept { return slots_[head & mask_]; }
    /// publish() for the slot claim_fast gave at `head`, which the caller keeps in a register:
    /// publish() loads the index again after the slot's stores, which might alias it.
    void publish_claimed(std::uint64_t head) noexcept {
        head_.store(head + 1, std::memory_order_release);
    }

    /// `n` slots in a row (2 to 4), for a record that takes more than one: the first, or
    /// nullptr when the ring lacks room for all of them (the caller drops and counts, or
    /// stages less). The others are next_of(first), next_of of that, and so on.
    staged_record* try_claim_n(std::size_t n) noexcept {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);  // only writer
        if (head + n - 1 >= check_mark_) [[unlikely]] {
            if (!make_room(head + n - 1)) {
                return nullptr;
            }
        }
        return &slots_[head & mask_];
    }
    staged_record* next_of(const staged_record* slot) noexcept {
        return &slots_[(static_cast<std::uint64_t>(slot - slots_.get()) + 1) & mask_];
    }
    /// Makes `n` claimed slots visible at once: the consumer never sees a record in part.
    void publish_n(std::size_t n) noexcept {
        head_.store(head_.load(std::memory_order_relaxed) + n, std::memory_order_release);
    }

    /// The producer's copy of the attribute cache (only the owning thread touches it).
    attribute_cache& sent_attributes() noexcept { return sent_; }
    /// The consumer's copy (only the consumer touches it, in drain's callback).
    attribute_cache& received_attributes() noexcept { return received_; }

    /// Counts one record that did not fit. Single writer, so a plain load and store suffice.
    void note_drop() noexcept {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    /// Calls f(const staged_record&) for each published slot, oldest first, at most `limit`
    /// of them (more when the last is `continued`: a record's slots are never split between
    /// two drains), then frees them. Returns how many it consumed.
    template <class F>
    std::size_t drain(F&& f, std::size_t limit) {
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        const std::uint64_t head = head_.load(std::memory_order_acquire);
        std::uint64_t n = head - tail;
        if (n > limit) {
            n = limit;
            // Published together, so present; bounded by what was published, whatever a slot
            // holds.
            while (n > 0 && n < head - tail &&
                   (slots_[(tail + n - 1) & mask_].flags & slot_flag::continued) != 0) {
                ++n;
            }
        }
        for (std::uint64_t i = 0; i < n; ++i) {
            f(slots_[(tail + i) & mask_]);
        }
        tail_.store(tail + n, std::memory_order_release);
        return static_cast<std::size_t>(n);
    }

    bool empty() const noexcept {
        return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
    }
    std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    std::size_t capacity() const noexcept { return capacity_; }

    /// Set when the owning thread exits; the flusher frees the ring once it is drained.
    void abandon() noexcept { abandoned_.store(true, std::memory_order_release); }
    bool abandoned() const noexcept { return abandoned_.load(std::memory_order_acquire); }

  private:
    /// Refreshes the consumer's index; asks for an early flush past half full; sets the next
    /// check mark. False when the ring is full.
    [[gnu::noinline]] bool make_room(std::uint64_t head) noexcept;

    // Producer's line.
    alignas(cache_line) std::atomic<std::uint64_t> head_{0};
    std::uint64_t cached_tail_ = 0;
    std::uint64_t check_mark_ = 0;
    std::atomic<std::uint64_t> dropped_{0};
    flush_signal* const signal_;
    alignas(cache_line) attribute_cache sent_;
    // Consumer's lines.
    alignas(cache_line) std::atomic<std::uint64_t> tail_{0};
    std::atomic<bool> abandoned_{false};
    alignas(cache_line) attribute_cache received_;
    // Read-only after construction.
    alignas(cache_line) std::size_t capacity_;
    std::uint64_t mask_;
    std::unique_ptr<staged_record[]> slots_;
};

/// The rings of one pipeline, one per thread that has recorded into it. Recording threads
/// come here once (their first record); the flusher takes snapshots. Never on the hot path.
class ring_registry {
  public:
    explicit ring_registry(std::size_t ring_capacity, flush_signal* signal = nullptr);
    ~ring_registry();

    ring_registry(const ring_registry&) = delete;
    ring_registry& operator=(const ring_registry&) = delete;

    /// The calling thread's ring, found in a small thread-local cache keyed by a process-unique
    /// id (never an address, which a later pipeline could reuse). nullptr only when a ring
    /// could not be allocated: the record the caller was staging is then counted as an
    /// unstaged drop here, and the caller drops it.
    staging_ring* local_ring() noexcept {
        if (tls_front_id == id_) [[likely]] {
            staging_ring* ring = tls_front_ring;
            // A way's id is set with its ring, and ids start at 1: told so, the compiler drops
            // the caller's null test from this path, which is the hot one.
            if (ring == nullptr) {
                __builtin_unreachable();
            }
            return ring;
        }
        return attach_slow();
    }

    /// Rings to drain; abandoned rings that are already empty are released.
    void snapshot(std::vector<std::shared_ptr<staging_ring>>& out);

    /// Records dropped because no ring could be allocated, plus the rings' drops.
    std::uint64_t dropped() const noexcept;

    std::uint64_t id() const noexcept { return id_; }
    std::size_t ring_capacity() const noexcept { return ring_capacity_; }

    static constexpr std::size_t cache_ways = 4;
    /// Constant-initialised and trivially destructible, so access needs no TLS wrapper call.
    /// The front way is two scalars, each one thread-pointer-relative load at a constant
    /// offset; the compiler keeps an array's address in a register instead, which the loop it
    /// is inlined into pays for.
    static constinit inline thread_local std::uint64_t tls_front_id = 0;
    static constinit inline thread_local staging_ring* tls_front_ring = nullptr;
    /// The other ways, oldest last.
    struct thread_cache {
        std::uint64_t ids[cache_ways - 1];
        staging_ring* rings[cache_ways - 1];
    };
    static constinit inline thread_local thread_cache tls_cache{};

  private:
    [[gnu::noinline]] staging_ring* attach_slow() noexcept;
    void note_unstaged_drop() noexcept { unstaged_drops_.fetch_add(1, std::memory_order_relaxed); }

    const std::uint64_t id_;
    const std::size_t ring_capacity_;
    flush_signal* const signal_;
    mutable std::mutex mutex_;
    std::vector<std::shared_ptr<staging_ring>> rings_;
    std::uint64_t released_drops_ = 0;  // drops of rings already released; under mutex_
    std::atomic<std::uint64_t> unstaged_drops_{0};
};

}  // namespace xtel::detail
