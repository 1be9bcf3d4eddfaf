#pragma once
/// The flusher's batch of events: an array that grows, whose append is a compare and a pointer
/// bump inlined into the drain, the growth out of line.
///
/// std::vector<event>::emplace_back stayed an out-of-line call in the flusher's drain (GCC 12
/// keeps its reallocation path with it): 12% of BM_transfer_tax/buffer's flush, four calls per
/// transfer, each value-initialising the 56-byte event its caller then overwrote.

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

#include "xtel/core/event.hpp"

namespace xtel::detail {

class event_batch {
  public:
    event_batch() = default;
    event_batch(const event_batch&) = delete;
    event_batch& operator=(const event_batch&) = delete;

    /// Room for `n` events without growing. May throw std::bad_alloc (set-up).
    void reserve(std::size_t n) {
        if (n > capacity_) {
            regrow(n);
        }
    }

    /// The next event, its fields not written: the caller writes every one. May throw
    /// std::bad_alloc when the batch grows (the flusher's, never the recording thread's).
    event& append() {
        if (size_ == capacity_) [[unlikely]] {
            regrow(capacity_ == 0 ? 64 : capacity_ * 2);
        }
        return data_[size_++];
    }
    void push_back(const event& e) { std::memcpy(&append(), &e, sizeof e); }

    void clear() noexcept { size_ = 0; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::span<const event> view() const noexcept { return {data_.get(), size_}; }

  private:
    [[gnu::noinline]] void regrow(std::size_t n) {
        // make_unique_for_overwrite would still run event's member initialisers; the events
        // are trivially copyable and written before they are read, so raw storage will do.
        storage grown(static_cast<event*>(::operator new(n * sizeof(event))));
        if (size_ > 0) {
            std::memcpy(static_cast<void*>(grown.get()), data_.get(), size_ * sizeof(event));
        }
        data_ = std::move(grown);
        capacity_ = n;
    }

    struct release {
        void operator()(event* p) const noexcept { ::operator delete(p); }
    };
    using storage = std::unique_ptr<event[], release>;

    storage data_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

}  // namespace xtel::detail
