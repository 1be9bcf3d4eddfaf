#pragma once
/// Per-thread staging: each recording thread owns a single-producer, single-consumer ring of
/// compact records; the flusher thread is the only consumer. Nothing here is shared between
/// two recording threads, so recording takes no lock and touches no other thread's lines.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "xtel/core/cache_line.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel::detail {

enum class record_kind : std::uint8_t {
    event = 0,        ///< one event: value + name in the payload
    transfer_tx = 1,  ///< a completed transmit: expands to 4 events at flush time
    transfer_rx = 2,  ///< a completed receive: expands to 4 events at flush time
    /// The request id of the transfer record before it (whose `continued` is set): the bytes
    /// of the id in tag_bytes, their number in tag_length.
    transfer_tag = 3,
    /// A transfer another agent made and notified this one of (transfer_record::notified),
    /// as this agent sees it: sent (a read of its memory) or received (a write into it).
    transfer_notified_tx = 4,
    transfer_notified_rx = 5,
};

/// What a transfer record carries besides its timestamp and byte count.
struct transfer_fields {
    std::uint64_t requests;
    std::uint64_t post_us;
    std::uint64_t xfer_us;
    transfer_attributes attrs;
};

/// One staged record: exactly one cache line, so that a record never straddles two.
/// A transfer is staged as one record and expanded into its events on the flusher thread;
/// that keeps the per-transfer cost to one line written.
struct alignas(cache_line) staged_record {
    std::uint64_t timestamp_us;
    std::uint64_t value;  ///< event value, or transfer bytes
    record_kind kind;
    category cat;
    value_kind vkind;
    /// Transfers: whether post_us and xfer_us were measured (see record_transfer_counts).
    bool timed;
    /// Transfers: the next record is this one's transfer_tag; the two are drained together.
    bool continued;
    /// Transfers: the transfer_shape, descriptors (16 bits, little-endian) then lanes.
    std::uint8_t shape[3];
    alignas(8) unsigned char payload[40];  ///< event_name, or transfer_fields
};
static_assert(sizeof(staged_record) == cache_line);

/// Where a transfer_tag record keeps its id: the bytes before `kind` and from `payload` on.
/// Its `cat` byte holds the length. Its `continued` is cleared: the id does not cover that
/// byte, and a slot reused from a continued transfer record would otherwise read as one to a
/// drain that ends on the id.
struct tag_layout {
    static constexpr std::size_t head = offsetof(staged_record, kind);  // 16 bytes
    static constexpr std::size_t tail_at = offsetof(staged_record, payload);
    static constexpr std::size_t tail = sizeof(staged_record) - tail_at;  // 40 bytes
    static constexpr std::size_t capacity = head + tail;

    static void write(staged_record& r, std::string_view id) noexcept {
        auto* bytes = reinterpret_cast<unsigned char*>(&r);
        const std::size_t n = id.size() < capacity ? id.size() : capacity;
        const std::size_t first = n < head ? n : head;
        std::memcpy(bytes, id.data(), first);
        std::memcpy(bytes + tail_at, id.data() + first, n - first);
        r.kind = record_kind::transfer_tag;
        r.cat = static_cast<category>(n);
        r.continued = false;
    }
    /// Appends the id to `out`.
    static void read(const staged_record& r, std::string& out) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(&r);
        std::size_t n = static_cast<std::size_t>(r.cat);
        n = n < capacity ? n : capacity;
        const std::size_t first = n < head ? n : head;
        out.append(reinterpret_cast<const char*>(bytes), first);
        out.append(reinterpret_cast<const char*>(bytes + tail_at), n - first);
    }
};
static_assert(tag_layout::capacity == max_request_id);
static_assert(sizeof(event_name) <= sizeof(staged_record::payload));
static_assert(sizeof(transfer_fields) == sizeof(staged_record::payload));

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
        const std::uint64_t head = head_local_;
        if (head >= check_mark_) [[unlikely]] {
            if (!make_room(head)) {
                return nullptr;
            }
        }
        return &slots_[head & mask_];
    }

    /// Makes the claimed record visible to the consumer.
    void publish() noexcept {
        ++head_local_;
        head_.store(head_local_, std::memory_order_release);
    }

    /// Two slots in a row, for a record and its continuation: the first, or nullptr when the
    /// ring lacks room for both (the caller drops and counts one record). The second is
    /// second_of(first).
    staged_record* try_claim_pair() noexcept {
        const std::uint64_t head = head_local_;
        if (head + 1 >= check_mark_) [[unlikely]] {
            if (!make_room(head + 1)) {
                return nullptr;
            }
        }
        return &slots_[head & mask_];
    }
    staged_record* second_of(const staged_record* first) noexcept {
        return &slots_[(static_cast<std::uint64_t>(first - slots_.get()) + 1) & mask_];
    }
    /// Makes both claimed records visible at once: the consumer never sees one without the
    /// other.
    void publish_pair() noexcept {
        head_local_ += 2;
        head_.store(head_local_, std::memory_order_release);
    }

    /// Counts one record that did not fit. Single writer, so a plain load and store suffice.
    void note_drop() noexcept {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    /// Calls f(const staged_record&) for each published record, oldest first, at most `limit`
    /// of them (one more when the last is `continued`: a pair is never split), then frees
    /// their slots. Returns how many it consumed.
    template <class F>
    std::size_t drain(F&& f, std::size_t limit) {
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        const std::uint64_t head = head_.load(std::memory_order_acquire);
        std::uint64_t n = head - tail;
        if (n > limit) {
            n = limit;
            if (n > 0 && slots_[(tail + n - 1) & mask_].continued) {
                ++n;  // published together, so present
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
    std::uint64_t head_local_ = 0;
    std::uint64_t cached_tail_ = 0;
    std::uint64_t check_mark_ = 0;
    std::atomic<std::uint64_t> dropped_{0};
    flush_signal* const signal_;
    // Consumer's line.
    alignas(cache_line) std::atomic<std::uint64_t> tail_{0};
    std::atomic<bool> abandoned_{false};
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
    /// could not be allocated; the caller drops and counts.
    staging_ring* local_ring() noexcept {
        const auto& c = tls_cache;
        if (c.ids[0] == id_) [[likely]] {
            return c.rings[0];
        }
        return attach_slow();
    }

    /// Rings to drain; abandoned rings that are already empty are released.
    void snapshot(std::vector<std::shared_ptr<staging_ring>>& out);

    /// Records dropped because no ring could be allocated, plus the rings' drops.
    std::uint64_t dropped() const noexcept;
    void note_unstaged_drop() noexcept { unstaged_drops_.fetch_add(1, std::memory_order_relaxed); }

    std::uint64_t id() const noexcept { return id_; }
    std::size_t ring_capacity() const noexcept { return ring_capacity_; }

    static constexpr std::size_t cache_ways = 4;
    /// Constant-initialised and trivially destructible, so access needs no TLS wrapper call:
    /// one thread-pointer-relative load on the hot path.
    struct thread_cache {
        std::uint64_t ids[cache_ways];
        staging_ring* rings[cache_ways];
    };
    static constinit inline thread_local thread_cache tls_cache{};

  private:
    [[gnu::noinline]] staging_ring* attach_slow() noexcept;

    const std::uint64_t id_;
    const std::size_t ring_capacity_;
    flush_signal* const signal_;
    mutable std::mutex mutex_;
    std::vector<std::shared_ptr<staging_ring>> rings_;
    std::uint64_t released_drops_ = 0;  // drops of rings already released; under mutex_
    std::atomic<std::uint64_t> unstaged_drops_{0};
};

}  // namespace xtel::detail
