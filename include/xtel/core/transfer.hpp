#pragma once
/// What a transfer names: memory descriptors, the operation, and the handle of a transfer.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace xtel {

/// Where memory lives. A descriptor names dram or vram (those two values are part of the
/// metadata format); a transfer's attributes may also report block, object or file memory, and
/// unknown for descriptors of mixed kinds or none. to_string gives the label values metrics
/// carry ("dram", "vram", ...).
enum class memory_kind : std::uint8_t {
    dram = 0,  ///< host memory
    vram = 1,  ///< GPU memory (CUDA)
    block = 2,
    object = 3,
    file = 4,
    unknown = 255,
};

constexpr std::string_view to_string(memory_kind k) noexcept {
    switch (k) {
        case memory_kind::dram:
            return "dram";
        case memory_kind::vram:
            return "vram";
        case memory_kind::block:
            return "block";
        case memory_kind::object:
            return "object";
        case memory_kind::file:
            return "file";
        case memory_kind::unknown:
            break;
    }
    return "unknown";
}

/// A contiguous span of memory in the process that owns it. Remote descriptors carry the
/// remote process's addresses, as the remote agent's metadata announced them.
struct descriptor {
    std::uint64_t address = 0;
    std::uint64_t length = 0;
    memory_kind kind = memory_kind::dram;
    std::uint32_t device = 0;  ///< GPU ordinal for vram; 0 for dram

    /// Host memory at p, n bytes long.
    static descriptor dram(const void* p, std::size_t n) noexcept {
        return {reinterpret_cast<std::uintptr_t>(p), n, memory_kind::dram, 0};
    }
    void* pointer() const noexcept { return reinterpret_cast<void*>(address); }
    std::uint64_t end() const noexcept { return address + length; }

    friend bool operator==(const descriptor&, const descriptor&) = default;
};

/// READ brings remote memory into local memory; WRITE sends local memory to remote memory.
/// to_string gives the label values metrics carry ("read", "write").
enum class transfer_op : std::uint8_t { read = 0, write = 1 };

constexpr std::string_view to_string(transfer_op op) noexcept {
    return op == transfer_op::read ? "read" : "write";
}

/// The longest request id a transfer carries, in bytes: a UUID (36), a W3C trace id (32) or a
/// whole traceparent (55) fits. A staged record keeps it beside the transfer's numbers.
inline constexpr std::size_t max_request_id = 56;

/// `id` cut to at most max_request_id bytes, never inside a UTF-8 sequence.
constexpr std::string_view clip_request_id(std::string_view id) noexcept {
    if (id.size() <= max_request_id) {
        return id;
    }
    std::size_t n = max_request_id;
    while (n > 0 && (static_cast<unsigned char>(id[n]) & 0xC0) == 0x80) {
        --n;  // id[n] continues a sequence that started before the cut
    }
    return id.substr(0, n);
}

/// The longest notification message, in bytes. One notification is then one eager UCX
/// message on every transport (no rendezvous round trip, whole in the receive callback), and a
/// target's queue of unread ones stays small; it holds a few request ids or block lists.
inline constexpr std::size_t max_notification = 4096;

/// What a caller can attach to a transfer when it creates it.
struct transfer_tags {
    /// The request (or trace) id the transfer serves, shown as the exemplar of the latency
    /// buckets its timed posts land in (docs/metrics.md); empty for none. Copied, and cut to
    /// max_request_id bytes.
    std::string_view request_id{};
    /// Whether each completion of the transfer notifies the remote agent (NIXL's hasNotif):
    /// a message the remote agent's get_notifications returns once the transfer's data is in
    /// place. Transfers without one pay nothing for the feature.
    bool notify = false;
    /// The notification's message (NIXL's notifMsg), copied; at most max_notification bytes.
    std::string_view notification{};
};

/// Names a transfer created by an agent; valid until released. A stale or foreign handle is
/// reported as invalid_argument, never followed.
struct transfer_handle {
    std::uint64_t id = 0;

    explicit operator bool() const noexcept { return id != 0; }
    friend bool operator==(transfer_handle, transfer_handle) = default;
};

}  // namespace xtel
