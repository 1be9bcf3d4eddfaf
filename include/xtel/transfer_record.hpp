#pragma once
/// What a completed transfer carries besides its numbers: the attributes operators slice
/// metrics by. Strings (backend, peer, GPU) travel as ids of the pipeline's label table, so a
/// transfer record stays one cache line and the hot path copies no string.

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xtel {

/// Which way a transfer's bytes went, as seen by the agent that records it.
enum class direction : std::uint8_t { tx, rx };

enum class operation : std::uint8_t { write = 0, read = 1 };
enum class memory_type : std::uint8_t {
    unknown = 0,
    dram = 1,
    vram = 2,
    block = 3,
    object = 4,
    file = 5
};
enum class transfer_status : std::uint8_t { success = 0, error = 1 };

constexpr std::string_view to_string(operation o) noexcept {
    return o == operation::read ? "read" : "write";
}
constexpr std::string_view to_string(memory_type m) noexcept {
    switch (m) {
        case memory_type::dram:
            return "dram";
        case memory_type::vram:
            return "vram";
        case memory_type::block:
            return "block";
        case memory_type::object:
            return "object";
        case memory_type::file:
            return "file";
        case memory_type::unknown:
            break;
    }
    return "unknown";
}
constexpr std::string_view to_string(transfer_status s) noexcept {
    return s == transfer_status::success ? "success" : "error";
}

/// Label ids come from label_table::intern; 0 means "not known".
using label_id = std::uint32_t;

/// 16 bytes: fits the staged record beside the transfer's numbers.
struct transfer_attributes {
    label_id backend = 0;
    label_id remote_agent = 0;
    label_id gpu = 0;
    operation op = operation::write;
    memory_type local_memory = memory_type::dram;
    memory_type remote_memory = memory_type::dram;
    transfer_status status = transfer_status::success;

    friend bool operator==(const transfer_attributes&, const transfer_attributes&) = default;
};
static_assert(sizeof(transfer_attributes) == 16);

/// A transfer as the flusher hands it to exporters that ask for transfers (see exporter.hpp).
struct transfer_record {
    std::uint64_t timestamp_us = 0;
    std::uint64_t bytes = 0;
    std::uint64_t requests = 0;
    std::uint64_t post_us = 0;
    std::uint64_t xfer_us = 0;
    direction dir = direction::tx;
    transfer_attributes attrs;
    /// Whether post_us and xfer_us were measured, for one transfer of the record. An agent
    /// that samples transfer times (config::timing_sample) reports the transfers it did not
    /// time as records with requests and bytes only: times 0, timed false.
    bool timed = true;
};

/// Interns the strings transfer attributes name (backends, peers, GPU identifiers). Interning
/// happens on slow paths (connecting to a peer, creating a transfer); the flusher looks ids up.
/// Bounded: past `capacity` names, intern() answers the overflow id, whose name is "other",
/// so an unbounded set of peer names cannot grow memory without bound.
class label_table {
  public:
    static constexpr label_id unknown = 0;
    static constexpr label_id overflow = 1;
    static constexpr std::size_t default_capacity = 65536;

    explicit label_table(std::size_t capacity = default_capacity) : capacity_(capacity) {
        names_.emplace_back("unknown");
        names_.emplace_back("other");
    }

    label_table(const label_table&) = delete;
    label_table& operator=(const label_table&) = delete;

    /// The id of `name`, adding it when new. Thread-safe.
    label_id intern(std::string_view name) {
        const std::lock_guard lock(mutex_);
        if (const auto it = ids_.find(std::string(name)); it != ids_.end()) {
            return it->second;
        }
        if (names_.size() >= capacity_ + 2) {
            return overflow;
        }
        const auto id = static_cast<label_id>(names_.size());
        names_.emplace_back(name);
        ids_.emplace(names_.back(), id);
        return id;
    }

    /// The name of an id ("unknown" for ids never issued). Thread-safe.
    std::string name(label_id id) const {
        const std::lock_guard lock(mutex_);
        return id < names_.size() ? names_[id] : names_[unknown];
    }

    std::size_t size() const {
        const std::lock_guard lock(mutex_);
        return names_.size();
    }

  private:
    const std::size_t capacity_;
    mutable std::mutex mutex_;
    std::deque<std::string> names_;  // stable addresses; index = id
    std::unordered_map<std::string, label_id> ids_;
};

}  // namespace xtel
