#pragma once
/// Per-thread staging: each recording thread owns a single-producer, single-consumer ring of
/// 32-byte slots; the flusher thread is the only consumer. Nothing here is shared between
/// two recording threads, so recording takes no lock and touches no other thread's lines.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "xtel/core/attribute_cache.hpp"
#include "xtel/core/cache_line.hpp"
#include "xtel/core/slot_codec.hpp"
#include "xtel/core/tag_cache.hpp"

namespace xtel::detail {

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
    /// The request id the producer staged last, and the consumer's copy (tag_cache.hpp).
    tag_cache& sent_tag() noexcept { return sent_tag_; }
    tag_cache& received_tag() noexcept { return received_tag_; }

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
    tag_cache sent_tag_;
    // Consumer's lines.
    alignas(cache_line) std::atomic<std::uint64_t> tail_{0};
    std::atomic<bool> abandoned_{false};
    alignas(cache_line) attribute_cache received_;
    tag_cache received_tag_;
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
