#pragma once
/// The request id a ring's producer staged last (ring.hpp), so that a run of transfers with one
/// id, as a request's blocks are, stages the id once: the transfers after the first carry
/// slot_flag::tag_as_last in their own slot, and the consumer gives them the id it read last
/// from the same ring. The producer changes it only with a slot it has claimed, and so will
/// publish, as it does the attribute cache.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "xtel/core/attribute_cache.hpp"
#include "xtel/core/transfer.hpp"

namespace xtel::detail {

struct tag_cache {
    /// The id, at most max_request_id bytes; `size` 0: none yet.
    alignas(16) char bytes[max_request_id] = {};
    std::size_t size = 0;

    /// Whether `id` (clipped to max_request_id) is the id staged last. Ids of 16 bytes or more
    /// (a UUID, a trace id, a traceparent) are compared in four overlapping 16-byte loads that
    /// stay inside both, without a call: about as much as the attribute check.
    bool is_last(std::string_view id) const noexcept {
        const std::size_t n = id.size();
        if (n != size) {
            return false;
        }
#if defined(__SSE2__)
        if (n >= 16) {
            return _mm_movemask_epi8(lanes_equal(id)) == 0xffff;
        }
#endif
        return std::memcmp(id.data(), bytes, n) == 0;
    }

#if defined(__SSE2__)
    /// For an id of 16 to 64 bytes and size(): 0xff in every lane where the four overlapping
    /// 16-byte loads of `id` and of the id staged last agree, so all 16 set only when they are
    /// equal.
    __m128i lanes_equal(std::string_view id) const noexcept {
        const std::size_t end = id.size() - 16;
        const auto eq = [&](std::size_t at) {
            return _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(id.data() + at)),
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + at)));
        };
        return _mm_and_si128(_mm_and_si128(eq(0), eq(end < 16 ? end : 16)),
                             _mm_and_si128(eq(end < 32 ? end : 32), eq(end)));
    }
#endif

    void remember(std::string_view id) noexcept {
        size = id.size() < max_request_id ? id.size() : max_request_id;
        std::memcpy(bytes, id.data(), size);
    }

    std::string_view view() const noexcept {
        return {bytes, size};
    }
};

/// Whether `id` (clipped) is the id `tag` staged last and `attrs` the set `sent` staged last:
/// the tagged hot path's two checks, where SSE2 has it with the five 16-byte compares in one
/// mask. With the slow path laid out of the loop (front_end::stage_transfer), a tagged record
/// went from 1.47x an untagged one to 1.39x (BM_transfer_tax/node_tagged against /node).
inline bool same_tag_and_attributes(const tag_cache& tag,
                                    std::string_view id,
                                    const attribute_cache& sent,
                                    const void* attrs) noexcept {
#if defined(__SSE2__)
    if (id.size() >= 16) {
        // `&`, not `&&`: the loads stay inside both ids whatever the sizes, so nothing waits
        // on the size compare.
        const int lanes =
            _mm_movemask_epi8(_mm_and_si128(tag.lanes_equal(id), sent.lanes_equal_to_last(attrs)));
        return static_cast<bool>(static_cast<int>(id.size() == tag.size) &
                                 static_cast<int>(lanes == 0xffff));
    }
#endif
    return tag.is_last(id) && sent.is_last(attrs);
}

static_assert(max_request_id >= 48 && max_request_id <= 64,
              "is_last's four loads cover ids of 16 to 64 bytes");

}  // namespace xtel::detail
