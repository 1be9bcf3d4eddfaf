#pragma once
// A record call's transfer attributes by (peer, op, backend), as Python names them: the label
// ids are interned once per peer (label_table::intern copies the name and locks), so that a
// repeated call finds them with one hash of the strings Python already holds and allocates
// nothing. Not locked: every call that uses it holds the GIL (the module is not declared
// free-threaded).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "xtel/core/label_table.hpp"
#include "xtel/core/transfer.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/attributes.hpp"

namespace xtel::python {

class peer_attributes {
  public:
    /// At most this many (peer, op, backend) are kept; past it the cache starts again, so that
    /// an engine naming a new peer per call grows no memory here (the label table is bounded
    /// too: its overflow id is "other").
    static constexpr std::size_t max_entries = 4096;

    explicit peer_attributes(label_table& labels) : labels_(labels) {
        if (const std::string& gpu = metrics::local_gpu_identifier(); !gpu.empty()) {
            gpu_ = labels_.intern(gpu);
        }
    }

    /// The attributes of a successful transfer `op` with `peer` over `backend` (empty: not
    /// known); memory kinds are not known to a Python caller.
    transfer_attributes of(std::string_view peer, transfer_op op, std::string_view backend) {
        const key_view k{peer, backend, op};
        if (const auto it = cache_.find(k); it != cache_.end()) {
            return it->second;
        }
        return add(k);
    }

  private:
    struct key_view {
        std::string_view peer, backend;
        transfer_op op;
    };
    struct key {
        std::string peer, backend;
        transfer_op op;
        operator key_view() const noexcept { return {peer, backend, op}; }
    };
    struct hash {
        using is_transparent = void;
        std::size_t operator()(const key_view& k) const noexcept {
            const std::size_t h = std::hash<std::string_view>{}(k.peer);
            return h ^
                   (std::hash<std::string_view>{}(k.backend) * 31 + static_cast<std::size_t>(k.op));
        }
    };
    struct equal {
        using is_transparent = void;
        bool operator()(const key_view& a, const key_view& b) const noexcept {
            return a.op == b.op && a.peer == b.peer && a.backend == b.backend;
        }
    };

    transfer_attributes add(const key_view& k) {
        if (cache_.size() >= max_entries) {
            cache_.clear();
        }
        transfer_attributes a;
        a.remote_agent = labels_.intern(k.peer);
        a.backend = k.backend.empty() ? label_table::unknown : labels_.intern(k.backend);
        a.gpu = gpu_;
        a.op = k.op;
        a.local_memory = memory_kind::unknown;
        a.remote_memory = memory_kind::unknown;
        cache_.emplace(key{std::string(k.peer), std::string(k.backend), k.op}, a);
        return a;
    }

    label_table& labels_;
    label_id gpu_ = label_table::unknown;
    std::unordered_map<key, transfer_attributes, hash, equal> cache_;
};

}  // namespace xtel::python
