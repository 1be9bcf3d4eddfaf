#pragma once
/// The attribute cache a staging ring keeps on both sides (ring.hpp): what lets a transfer
/// whose attributes its thread used lately be staged in one slot, without them.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "xtel/core/transfer_record.hpp"

namespace xtel::detail {

/// Both sides' copy of a ring's transfer attribute cache: 16 attribute sets, each at the way
/// attribute_way gives it, and the set staged last. A transfer whose attributes are the last
/// set is staged in one slot that says so (same_as_last: no way to load on the hot path); one
/// whose attributes are at their way in the producer's copy, in one slot that names the way;
/// any other with its attributes, which both sides then store at that way. A slot that names a
/// way makes it the last. The consumer reads the slots in the order they were written, so its
/// copy is the producer's as of the slot it reads: the producer changes its copy only for a
/// slot it has claimed, and so will publish. Both start all "not known", the last at way 0.
struct attribute_cache {
    static constexpr std::size_t ways = 16;
    /// A slot's way byte for "the set staged last"; 0 to 15 name a way.
    static constexpr unsigned same_as_last = 0x10;
    /// The last set, so that a run of transfers with the same attributes (an agent's usual
    /// case) is checked with one compare and no hash, and its way.
    alignas(16) std::uint64_t last[2] = {};
    unsigned last_way = 0;
    std::uint64_t words[ways][2] = {};

    static constexpr unsigned way_of(std::uint64_t w0, std::uint64_t w1) noexcept {
        // Folded first: the peer's label id is in w0's high half, which a multiply alone
        // would mostly shift out of the top bits.
        std::uint64_t h = w0 ^ std::rotl(w1, 29);
        h ^= h >> 32;
        return static_cast<unsigned>((h * 0x9e3779b97f4a7c15ULL) >> 60);
    }
    /// Whether `attrs` (16 bytes) are the set staged last. One 16-byte compare where SSE2 has
    /// it: three operations where two 8-byte compares take five.
    bool is_last(const void* attrs) const noexcept {
#if defined(__SSE2__)
        return _mm_movemask_epi8(lanes_equal_to_last(attrs)) == 0xffff;
#else
        std::uint64_t w[2];
        std::memcpy(w, attrs, sizeof w);
        return last[0] == w[0] && last[1] == w[1];
#endif
    }
#if defined(__SSE2__)
    /// `attrs` against the last set, byte by byte (0xff where equal): is_last's compare, for a
    /// caller that tests it together with another (same_tag_and_attributes, tag_cache.hpp).
    __m128i lanes_equal_to_last(const void* attrs) const noexcept {
        const __m128i a = _mm_loadu_si128(static_cast<const __m128i*>(attrs));
        const __m128i l = _mm_load_si128(reinterpret_cast<const __m128i*>(last));
        return _mm_cmpeq_epi8(a, l);
    }
#endif
    /// Whether `way` holds the set. Changes nothing: the producer asks before it has a slot.
    bool holds(unsigned way, std::uint64_t w0, std::uint64_t w1) const noexcept {
        return words[way][0] == w0 && words[way][1] == w1;
    }
    /// The set at `way` becomes the last.
    void remember(unsigned way) noexcept {
        last[0] = words[way][0];
        last[1] = words[way][1];
        last_way = way;
    }
    void store(unsigned way, std::uint64_t w0, std::uint64_t w1) noexcept {
        words[way][0] = w0;
        words[way][1] = w1;
        remember(way);
    }
    /// The consumer's side: the way a slot's way byte means, which becomes the last when the
    /// byte names it.
    unsigned resolve(unsigned char way_byte) noexcept {
        if ((way_byte & same_as_last) == 0) {
            remember(way_byte & (ways - 1));
        }
        return last_way;
    }
    transfer_attributes at(unsigned way) const noexcept {
        transfer_attributes a;
        std::memcpy(&a, words[way & (ways - 1)], sizeof a);
        return a;
    }
};
static_assert(attribute_cache::way_of(0, 0) == 0);
static_assert(sizeof(transfer_attributes) == 2 * sizeof(std::uint64_t));

}  // namespace xtel::detail
