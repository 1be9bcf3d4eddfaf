#pragma once
/// Trace context of a transfer: the trace a transfer's span joins and the span it hangs under,
/// read from the request id its caller tagged it with (transfer_tags::request_id), and the ids
/// of new spans. docs/trace-format.md ("Trace context") states the rules so that another
/// implementation, on the other side of a transfer, reaches the same trace id.

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "xtel/core/ascii.hpp"

namespace xtel::trace {

/// A W3C trace id: 16 bytes, never all zero in a valid context.
using trace_id = std::array<std::uint8_t, 16>;
/// A W3C span id: 8 bytes, never all zero in a valid context.
using span_id = std::array<std::uint8_t, 8>;

/// Where a context's trace id came from.
enum class origin : std::uint8_t {
    traceparent = 1,  ///< the request id is a W3C traceparent: the caller's trace and span
    trace_id = 2,  ///< the request id is a trace id (32 hex digits): the caller's trace, no parent
    derived = 3,   ///< any other request id: a trace id derived from it (derive_trace_id)
};

/// The trace a tagged transfer belongs to.
struct context {
    trace_id trace{};
    span_id parent{};        ///< all zero: the transfer's span is a root span
    std::uint8_t flags = 0;  ///< the traceparent's trace-flags (bit 0: the caller sampled)
    origin from = origin::derived;

    friend bool operator==(const context&, const context&) = default;
};

/// The context a W3C traceparent carries ("00-<32 hex>-<16 hex>-<2 hex>"), or std::nullopt when
/// `s` is not one: a version other than two hex digits or ff, version 00 not exactly 55
/// characters, a later version longer than 55 whose 56th character is not '-', an id all zero,
/// a character that is not a hex digit. Hex digits in either case are accepted, as the
/// exemplars' reading of the same tag accepts them (docs/otlp.md), so both name one trace.
std::optional<context> parse_traceparent(std::string_view s) noexcept;

/// The first 16 bytes of the SHA-256 of `request_id`'s bytes (all zero, which no SHA-256 of a
/// short input is known to give, becomes ...01): the same request id gives the same trace id in
/// every process and every implementation.
trace_id derive_trace_id(std::string_view request_id) noexcept;

/// The context of a transfer tagged with `request_id`, by the first rule that applies: a
/// traceparent; 32 hex digits not all zero (a trace id); otherwise derived. std::nullopt for an
/// empty request id (an untagged transfer has no trace of its own).
std::optional<context> context_of(std::string_view request_id) noexcept;

/// True when every byte is zero (an invalid id).
template <std::size_t N>
constexpr bool is_zero(const std::array<std::uint8_t, N>& id) noexcept {
    for (const auto b : id) {
        if (b != 0) {
            return false;
        }
    }
    return true;
}

/// `id` as lower-case hex (32 or 16 characters), as traceparents and OTLP/JSON write ids.
template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& id) {
    return ascii::to_hex(id);
}

/// New span ids (and trace ids for spans with no trace of their own): random, never zero. Not
/// shared between threads: each thread (the agent's flusher) keeps its own. Seeded from
/// std::random_device once; the ids need to be unlikely to collide, not unguessable.
///
/// Inline: the span stage draws a trace id for every untagged candidate transfer (its sampling
/// decision reads it), and the calls out of line, with the ids built byte by byte, were a fifth
/// of the node pipeline's flush.
class id_generator {
  public:
    id_generator();
    /// A generator whose ids follow from `seed` (tests).
    explicit id_generator(std::uint64_t seed) noexcept : state_(seed) {}

    span_id next_span_id() noexcept {
        std::uint64_t v = 0;
        while (v == 0) {
            v = next();
        }
        span_id id;
        put_bytes(v, id.data());
        return id;
    }
    /// Two draws, the first the id's first 8 bytes; drawn again while both are zero.
    trace_id next_trace_id() noexcept {
        std::uint64_t a = 0;
        std::uint64_t b = 0;
        while (a == 0 && b == 0) {
            a = next();
            b = next();
        }
        trace_id id;
        put_bytes(a, id.data());
        put_bytes(b, id.data() + 8);
        return id;
    }

    /// SplitMix64's output function: spreads a counter's bits over the whole word.
    static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

  private:
    std::uint64_t next() noexcept {
        state_ += 0x9e3779b97f4a7c15ULL;
        return mix(state_);
    }
    /// `w`'s 8 bytes into `out`, the least significant first.
    static void put_bytes(std::uint64_t w, std::uint8_t* out) noexcept {
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(out, &w, sizeof w);
        } else {
            for (std::size_t i = 0; i < sizeof w; ++i) {
                out[i] = static_cast<std::uint8_t>(w >> (8 * i));
            }
        }
    }

    std::uint64_t state_;
};

}  // namespace xtel::trace
