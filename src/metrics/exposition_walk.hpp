#pragma once
/// What every exposition format shares (private to src/metrics/): the walk that merges the
/// families of several snapshots by name, and which labels an exemplar is shown with. The text
/// formats (exposition.cpp) and the protobuf format (protobuf_exposition.cpp) both follow
/// them, so that the three bodies of one scrape name the same series and exemplars.

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "xtel/core/ascii.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::metrics::detail {

/// One snapshot's family within a merged family.
struct family_part {
    std::size_t snapshot = 0;  ///< index into the snapshots rendered
    const family_snapshot* family = nullptr;
};

/// Calls `visit(head, parts)` for each family name of `snapshots`, in name order: `head` is the
/// first snapshot's family of that name (whose descriptors are shown), `parts` every
/// snapshot's family of that name and of head's type, in the order of the snapshots. A family
/// of the same name and another type is in no part (render() documents it). Each snapshot's
/// families must be sorted by name, as a snapshot keeps them.
template <class Visit>
void for_each_merged_family(std::span<const std::shared_ptr<const snapshot>> snapshots,
                            Visit&& visit) {
    std::vector<std::size_t> pos(snapshots.size(), 0);
    std::vector<family_part> parts;
    while (true) {
        const family_snapshot* head = nullptr;
        for (std::size_t a = 0; a < snapshots.size(); ++a) {
            const auto& families = snapshots[a]->families;
            if (pos[a] < families.size() &&
                (head == nullptr || families[pos[a]].spec.name < head->spec.name)) {
                head = &families[pos[a]];
            }
        }
        if (head == nullptr) {
            return;
        }
        parts.clear();
        for (std::size_t a = 0; a < snapshots.size(); ++a) {
            const auto& families = snapshots[a]->families;
            if (pos[a] < families.size() && families[pos[a]].spec.name == head->spec.name) {
                if (families[pos[a]].spec.type == head->spec.type) {
                    parts.push_back({a, &families[pos[a]]});
                }
                ++pos[a];
            }
        }
        visit(*head, std::span<const family_part>(parts));
    }
}

/// The characters an exemplar's labels may hold together, names and values (OpenMetrics 1.0).
inline constexpr std::size_t max_exemplar_characters = 128;

/// Which labels an exemplar is shown with: `trace_id` and `span_id` when the agent found the
/// transfer's trace (and wrote its span), then its own label (`request_id`) when the whole set
/// stays within OpenMetrics' 128 characters; without a trace, its own label alone. `shown` is
/// false when it has none of them (no exemplar, an invalid label name, or an own label too
/// long without a trace).
struct exemplar_labels {
    bool shown = false;
    bool trace = false;
    bool span = false;
    bool own = false;
};

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& id) {
    return std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; });
}

/// The exemplar label names the renderers show: [a-zA-Z_][a-zA-Z0-9_]*.
inline bool is_exemplar_label_name(std::string_view s) {
    const auto letter = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    return !s.empty() && letter(s[0]) && std::all_of(s.begin() + 1, s.end(), [&](char c) {
        return letter(c) || (c >= '0' && c <= '9');
    });
}

/// Characters of `s` once shown: each invalid byte becomes one U+FFFD.
inline std::size_t shown_characters(std::string_view s) {
    std::size_t n = 0;
    while (!s.empty()) {
        s.remove_prefix(std::max<std::size_t>(utf8_sequence(s), 1));
        ++n;
    }
    return n;
}

inline exemplar_labels labels_of(const exemplar& e) {
    exemplar_labels l;
    if (e.label_value.empty() || !is_exemplar_label_name(e.label_name)) {
        return l;
    }
    l.trace = !all_zero(e.trace_id);
    l.span = l.trace && !all_zero(e.span_id);
    const std::size_t ids = (l.trace ? 8 + 32 : 0) + (l.span ? 7 + 16 : 0);
    l.own = e.label_name.size() + shown_characters(e.label_value) + ids <= max_exemplar_characters;
    l.shown = l.own || l.trace;
    return l;
}

/// `id` as lower-case hex, as exemplars show trace and span ids.
template <std::size_t N>
std::array<char, 2 * N> to_hex(const std::array<std::uint8_t, N>& id) {
    return ascii::to_hex_array(id);
}

}  // namespace xtel::metrics::detail
