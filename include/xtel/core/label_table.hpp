#pragma once
/// The strings transfer attributes refer to (backends, peers, GPU identifiers), interned once
/// so that a transfer carries small ids and the hot path copies no string.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace xtel {

/// Label ids come from label_table::intern; 0 means "not known".
using label_id = std::uint32_t;

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
