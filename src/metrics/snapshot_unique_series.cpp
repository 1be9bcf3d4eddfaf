// The check that a family holds no series twice as readers show it, in time linear in its
// series whatever their values (a hash sort, then a comparison within each run of equal hashes).

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "metrics/snapshot_decode.hpp"
#include "xtel/metrics/exposition_rules.hpp"

namespace xtel::metrics::detail::codec {

namespace {

/// The low bits of a series_key, which hold the series' index (limits::max_series_per_family
/// fits them); the hash is in the bits above.
constexpr int index_bits = 20;
static_assert(limits::max_series_per_family <= (1u << index_bits));

/// A series' label values as readers show them: two series whose values differ only in bytes
/// that are not UTF-8 are one series once shown.
std::vector<std::string> shown_values(const series& s) {
    std::vector<std::string> out;
    out.reserve(s.label_values.size());
    for (const std::string& v : s.label_values) {
        out.push_back(is_utf8(v) ? v : shown_value(v));
    }
    return out;
}

/// Sorts `keys` by their hash bits (from index_bits up) in time linear in their number whatever
/// they hold: a least-significant-digit radix sort, 4 passes of 11 bits. Equal hashes end up
/// next to each other, which is all check_unique_series needs.
void sort_by_hash(std::vector<std::uint64_t>& keys, std::vector<std::uint64_t>& scratch) {
    constexpr int digit_bits = 11;
    constexpr std::uint64_t digit_mask = (std::uint64_t{1} << digit_bits) - 1;
    static_assert((64 - index_bits) % digit_bits == 0 && (64 - index_bits) / digit_bits % 2 == 0,
                  "whole digits, and an even number of passes so the result is in keys");
    std::array<std::uint32_t, std::size_t{1} << digit_bits> at{};
    scratch.resize(keys.size());
    for (int shift = index_bits; shift < 64; shift += digit_bits) {
        at.fill(0);
        for (const std::uint64_t k : keys) {
            ++at[(k >> shift) & digit_mask];
        }
        std::uint32_t sum = 0;
        for (std::uint32_t& a : at) {
            sum += std::exchange(a, sum);
        }
        for (const std::uint64_t k : keys) {
            scratch[at[(k >> shift) & digit_mask]++] = k;
        }
        keys.swap(scratch);
    }
}

}  // namespace

std::uint64_t series_key(const series& s, std::uint32_t index) {
    std::uint64_t h = 0;
    for (const std::string& v : s.label_values) {
        const std::size_t hv =
            is_utf8(v) ? std::hash<std::string>{}(v) : std::hash<std::string>{}(shown_value(v));
        h = (h ^ hv) * 0x100000001b3ull;
    }
    return (h << index_bits) | index;
}

void check_unique_series(reader& r,
                         const family_snapshot& f,
                         std::vector<std::uint64_t>& keys,
                         std::vector<std::uint64_t>& scratch,
                         std::span<const std::size_t> starts) {
    constexpr std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;
    // Series of equal values (as shown) have equal hashes, so they end up in one run of equal
    // hashes; a run (almost always of one) is sorted by the values themselves, so that values
    // made to collide cost a comparison each, not a quadratic search.
    sort_by_hash(keys, scratch);
    std::optional<std::pair<std::uint32_t, std::uint32_t>> repeat;        // {first, again}
    std::vector<std::pair<std::vector<std::string>, std::uint32_t>> run;  // {shown, index}
    for (std::size_t begin = 0, end = 0; begin < keys.size(); begin = end) {
        end = begin + 1;
        while (end < keys.size() && (keys[end] >> index_bits) == (keys[begin] >> index_bits)) {
            ++end;
        }
        if (end - begin == 1) {
            continue;
        }
        run.clear();
        for (std::size_t k = begin; k < end; ++k) {
            const auto i = static_cast<std::uint32_t>(keys[k] & index_mask);
            run.emplace_back(shown_values(f.series[i]), i);
        }
        std::sort(run.begin(), run.end());
        // Of every repeat, the one that comes first in the payload is named.
        for (std::size_t k = 1; k < run.size(); ++k) {
            if (run[k - 1].first == run[k].first && (!repeat || run[k].second < repeat->second)) {
                repeat = {run[k - 1].second, run[k].second};
            }
        }
    }
    if (repeat) {
        std::string shown;
        for (const std::string& v : f.series[repeat->second].label_values) {
            shown += shown.empty() ? "" : ", ";
            shown += printable(v);
        }
        r.at_series(repeat->second);
        r.fail(starts[repeat->second],
               fmt::format("the label values ({}) are series {}'s too, as readers show them "
                           "(bytes that are not UTF-8 as U+FFFD): expected each series once",
                           shown, repeat->first));
    }
}

}  // namespace xtel::metrics::detail::codec
