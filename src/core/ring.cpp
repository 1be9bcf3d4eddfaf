#include "xtel/core/ring.hpp"

#include <algorithm>
#include <bit>

namespace xtel::detail {

namespace {

std::atomic<std::uint64_t> next_registry_id{1};

/// Keeps the rings a thread attached to alive until the thread exits, then marks them
/// abandoned so their pipeline can free them after draining. Touched only on the slow path.
struct thread_ring_owner {
    std::vector<std::shared_ptr<staging_ring>> rings;
    ~thread_ring_owner() {
        for (auto& r : rings) {
            r->abandon();
        }
    }
};

thread_local thread_ring_owner owned_rings;

}  // namespace

staging_ring::staging_ring(std::size_t capacity, flush_signal* signal)
    : signal_(signal),
      capacity_(std::bit_ceil(std::max<std::size_t>(capacity, 2))),
      mask_(capacity_ - 1),
      slots_(new staged_record[capacity_]) {
    check_mark_ = capacity_ / 2;
}

bool staging_ring::make_room(std::uint64_t head) noexcept {
    cached_tail_ = tail_.load(std::memory_order_acquire);
    const std::uint64_t used = head - cached_tail_;
    const std::uint64_t half = capacity_ / 2;
    if (used >= half && signal_ != nullptr) {
        signal_->request();
    }
    if (used >= capacity_) {
        // Stay on this path until the consumer frees a slot. Not `head`: for a record of
        // several slots, `head` is its last slot, and a mark there let the single claim that
        // follows a refused one in a full ring skip this check and write over an unread record.
        check_mark_ = cached_tail_ + capacity_;
        return false;
    }
    // Past half full, look again only when the ring would be full (the flusher has been asked);
    // below it, when it reaches half full.
    check_mark_ = cached_tail_ + (used >= half ? capacity_ : half);
    return true;
}

ring_registry::ring_registry(std::size_t ring_capacity, flush_signal* signal)
    : id_(next_registry_id.fetch_add(1, std::memory_order_relaxed)),
      ring_capacity_(ring_capacity),
      signal_(signal) {}

ring_registry::~ring_registry() {
    // Threads that are still alive keep their rings (shared ownership) until they exit; the id
    // in their cache is never issued again, so they never reach those rings through us.
    const std::lock_guard lock(mutex_);
    for (auto& r : rings_) {
        r->abandon();
    }
}

staging_ring* ring_registry::attach_slow() noexcept {
    auto& c = tls_cache;
    for (std::size_t i = 0; i < cache_ways - 1; ++i) {
        if (c.ids[i] == id_) {
            std::swap(tls_front_id, c.ids[i]);
            std::swap(tls_front_ring, c.rings[i]);
            return tls_front_ring;
        }
    }
    try {
        auto ring = std::make_shared<staging_ring>(ring_capacity_, signal_);
        {
            const std::lock_guard lock(mutex_);
            rings_.push_back(ring);
        }
        auto& owned = owned_rings.rings;
        // Forget rings of pipelines that are gone, so a long-lived thread does not hold them.
        std::erase_if(owned, [](const auto& r) { return r.use_count() == 1; });
        owned.push_back(ring);
        // Shift the cache down one way and put this ring in front.
        for (std::size_t i = cache_ways - 2; i > 0; --i) {
            c.ids[i] = c.ids[i - 1];
            c.rings[i] = c.rings[i - 1];
        }
        c.ids[0] = tls_front_id;
        c.rings[0] = tls_front_ring;
        tls_front_id = id_;
        tls_front_ring = ring.get();
        return ring.get();
    } catch (...) {
        note_unstaged_drop();
        return nullptr;
    }
}

void ring_registry::snapshot(std::vector<std::shared_ptr<staging_ring>>& out) {
    out.clear();
    const std::lock_guard lock(mutex_);
    std::erase_if(rings_, [this](const std::shared_ptr<staging_ring>& r) {
        if (r->abandoned() && r->empty()) {
            released_drops_ += r->dropped();
            return true;
        }
        return false;
    });
    out.assign(rings_.begin(), rings_.end());
}

std::uint64_t ring_registry::dropped() const noexcept {
    const std::lock_guard lock(mutex_);
    std::uint64_t total = released_drops_ + unstaged_drops_.load(std::memory_order_relaxed);
    for (const auto& r : rings_) {
        total += r->dropped();
    }
    return total;
}

}  // namespace xtel::detail
