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
            const std::size_t end = n - 16;
            const auto eq = [&](std::size_t at) {
                return _mm_cmpeq_epi8(
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(id.data() + at)),
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + at)));
            };
            const __m128i all = _mm_and_si128(_mm_and_si128(eq(0), eq(end < 16 ? end : 16)),
                                              _mm_and_si128(eq(end < 32 ? end : 32), eq(end)));
            return _mm_movemask_epi8(all) == 0xffff;
        }
#endif
        return std::memcmp(id.data(), bytes, n) == 0;
    }

    void remember(std::string_view id) noexcept {
        size = id.size() < max_request_id ? id.size() : max_request_id;
        std::memcpy(bytes, id.data(), size);
    }

    std::string_view view() const noexcept {
        return {bytes, size};
    }
};
static_assert(max_request_id >= 48 && max_request_id <= 64,
              "is_last's four loads cover ids of 16 to 64 bytes");

}  // namespace xtel::detail
