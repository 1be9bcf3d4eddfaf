#pragma once
// What xtel.instrument.nixl keeps of one NIXL agent's transfers between make_prepped_xfer and
// release_xfer_handle, and of the descriptor lists prep_xfer_dlist made, keyed by NIXL's handles
// (the `_handle` integers of its Python objects). Kept in C++ rather than in the wrapper's own
// Python objects: an engine makes every transfer through four wrapped calls, and each Python
// step inside them (a dictionary, an attribute, an object) cost the transfer 70 to 250 ns once
// NIXL's own call had run, 3 us in all where the issue allows 2 (bench/python_instrument_nixl.py);
// a call into the table is one step. Not locked: every call holds the GIL.

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xtel/core/transfer.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel::python {

/// A request id of at most max_request_id bytes, kept in place: a transfer's costs no
/// allocation.
class kept_id {
  public:
    void set(std::string_view id, bool traceparent) noexcept;
    void clear() noexcept { size_ = 0; }
    bool empty() const noexcept { return size_ == 0; }
    /// Whether it is a W3C traceparent (the caller's span), not a request id.
    bool traceparent() const noexcept { return traceparent_; }
    std::string_view view() const noexcept { return {bytes_, size_}; }

  private:
    char bytes_[max_request_id] = {};
    std::uint8_t size_ = 0;
    bool traceparent_ = false;
};

/// One transfer handle NIXL made: what it moves, its post, and whether it waits to be recorded.
struct tracked_transfer {
    transfer_attributes attrs{};
    std::uint64_t bytes = 0;
    std::uint64_t descriptors = 1;
    /// time.perf_counter_ns() (CLOCK_MONOTONIC) when transfer() was called; 0: not posted.
    std::uint64_t started_ns = 0;
    std::uint64_t post_us = 0;
    /// Posted and not recorded yet: the next DONE or ERR records it.
    bool pending = false;
    kept_id id;
};

/// A prepped descriptor list: the agent it names (empty: this one) and each descriptor's length,
/// when the wrapper could tell them.
struct tracked_dlist {
    std::string peer;
    std::optional<std::vector<std::uint64_t>> lengths;
};

class transfer_table {
  public:
    transfer_table() { spare_.reserve(max_spare); }
    // Node handles cannot be copied; declared so, so that a copy is refused where it is asked
    // for (nanobind asks whether its owner can be copied).
    transfer_table(const transfer_table&) = delete;
    transfer_table& operator=(const transfer_table&) = delete;
    transfer_table(transfer_table&&) = default;
    transfer_table& operator=(transfer_table&&) = default;

    /// At most this many transfers and as many lists are kept: a handle the engine releases
    /// through NIXL's own objects (not the agent's call) is never seen again. Past it, one
    /// entry is forgotten for each new one.
    static constexpr std::size_t max_entries = 65536;

    void add_dlist(std::uint64_t handle, tracked_dlist list);
    void forget_dlist(std::uint64_t handle) noexcept { dlists_.erase(handle); }
    const tracked_dlist* dlist(std::uint64_t handle) const noexcept;

    /// The entry of a transfer handle just made, reset; made from a released one's node once
    /// the agent has run a while, so that a transfer allocates nothing.
    tracked_transfer& add(std::uint64_t handle);
    tracked_transfer* find(std::uint64_t handle) noexcept;
    void release(std::uint64_t handle) noexcept;

  private:
    using transfers = std::unordered_map<std::uint64_t, tracked_transfer>;
    /// Nodes kept for reuse: as many as transfers in flight at once, up to this.
    static constexpr std::size_t max_spare = 64;

    std::unordered_map<std::uint64_t, tracked_dlist> dlists_;
    transfers transfers_;
    std::vector<transfers::node_type> spare_;
};

/// `out` set to the request id of NIXL notification message `notif` as the instrumentation
/// reads one: bytes (or a bytearray) decoded as UTF-8 with a malformed sequence replaced (as
/// Python's 'replace' does), a str as it is, any other object as str() gives it; cleared for a
/// message that is false (empty, None).
void set_request_of(kept_id& out, nanobind::handle notif);

/// A NIXL agent's name or message as the instrumentation reads one: bytes (or a bytearray)
/// decoded as UTF-8 with a malformed sequence replaced, a str as it is, any other object as
/// str() gives it.
std::string text_of(nanobind::handle value);

/// What the descriptors at `indices` (a list or tuple of ints, or any iterable of integers: a
/// numpy array) of a list whose descriptors have `lengths` move, and in `count` how many there
/// are. Raises IndexError for an index outside the list.
std::uint64_t bytes_at(const std::vector<std::uint64_t>& lengths,
                       nanobind::handle indices,
                       std::uint64_t& count);

}  // namespace xtel::python
