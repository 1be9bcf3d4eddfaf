#pragma once
/// The snapshot decoder's pieces (private to src/metrics/): the reader every stage reads the
/// input through, and the stages, one file each: the header, labels and families
/// (snapshot_decode.cpp), a family's spec (snapshot_decode_spec.cpp), a series
/// (snapshot_decode_series.cpp) and the check that no series is there twice
/// (snapshot_unique_series.cpp).

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/parse.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel::metrics::detail::codec {

using limits = snapshot_codec_limits;

inline constexpr std::string_view metric_name_rule = "[a-zA-Z_:][a-zA-Z0-9_:]*";
inline constexpr std::string_view label_name_rule = "[a-zA-Z_][a-zA-Z0-9_]*, not starting with __";

/// A string from the input as a message may quote it: quoted, printable ASCII, cut short, so
/// that what() stays one readable line whatever the bytes.
inline std::string printable(std::string_view s) {
    return parse::printable(s, parse::shown::quoted, 48);
}

/// Reads the input front to back; every read checks the bytes left, every failure throws
/// snapshot_decode_error naming the byte offset and where in the snapshot it was.
class reader {
  public:
    static constexpr std::size_t none = SIZE_MAX;

    explicit reader(std::span<const std::byte> in) : in_(in) {}

    std::size_t offset() const noexcept { return pos_; }
    std::size_t left() const noexcept { return in_.size() - pos_; }

    /// Where the next failure is said to be: the family and series being read (none: not in
    /// one), so a message reads "family 3 series 7: ...".
    void at_family(std::size_t f, const std::string* name) {
        family_ = f;
        family_name_ = name;
        series_ = none;
    }
    void at_series(std::size_t s) { series_ = s; }

    /// Throws snapshot_decode_error naming byte `at`, the family and series at_family and
    /// at_series set, and `what`.
    [[noreturn]] void fail(std::size_t at, std::string_view what) const;

    std::span<const std::byte> bytes(std::size_t n, std::string_view field) {
        if (n > left()) {
            fail(pos_, fmt::format("truncated: {} takes {} bytes, {} left", field, n, left()));
        }
        const auto out = in_.subspan(pos_, n);
        pos_ += n;
        return out;
    }
    std::uint8_t u8(std::string_view field) {
        return std::to_integer<std::uint8_t>(bytes(1, field)[0]);
    }
    template <std::size_t N>
    void raw(std::array<std::uint8_t, N>& out, std::string_view field) {
        const auto b = bytes(N, field);
        for (std::size_t i = 0; i < N; ++i) {
            out[i] = std::to_integer<std::uint8_t>(b[i]);
        }
    }
    std::uint32_t u32(std::string_view field) {
        return static_cast<std::uint32_t>(le(bytes(4, field)));
    }
    std::uint64_t u64(std::string_view field) { return le(bytes(8, field)); }
    std::int8_t i8(std::string_view field) { return static_cast<std::int8_t>(u8(field)); }
    std::int32_t i32(std::string_view field) { return static_cast<std::int32_t>(u32(field)); }

    /// A count of elements that take at least `min_size` bytes each: refused past `limit` or
    /// past what the bytes left can hold, so that reserving for it is safe.
    std::uint32_t count(std::string_view field, std::uint32_t limit, std::size_t min_size) {
        const std::size_t at = pos_;
        const std::uint32_t n = u32(field);
        if (n > limit) {
            fail(at, fmt::format("{} is {}: at most {} are accepted", field, n, limit));
        }
        if (n > left() / min_size) {
            fail(at, fmt::format("{} is {}, but {} bytes left hold at most {}", field, n, left(),
                                 left() / min_size));
        }
        return n;
    }
    /// The count of a vector that must hold exactly `expected` elements (`why` says why).
    std::uint32_t exact_count(std::string_view field,
                              std::size_t expected,
                              std::string_view why,
                              std::size_t min_size) {
        const std::size_t at = pos_;
        const std::uint32_t n = u32(field);
        if (n != expected) {
            fail(at, fmt::format("{} is {}: expected {} ({})", field, n, expected, why));
        }
        if (n > left() / min_size) {
            fail(at, fmt::format("truncated: {} {} take at least {} bytes, {} left", n, field,
                                 n * min_size, left()));
        }
        return n;
    }
    std::string string(std::string_view field) {
        const std::size_t at = pos_;
        const std::uint32_t n = u32(field);
        if (n > limits::max_string_bytes) {
            fail(at, fmt::format("{} is {} bytes long: at most {} are accepted", field, n,
                                 limits::max_string_bytes));
        }
        const auto b = bytes(n, field);
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }

  private:
    static std::uint64_t le(std::span<const std::byte> b) {
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < b.size(); ++i) {
            v |= std::to_integer<std::uint64_t>(b[i]) << (8 * i);
        }
        return v;
    }

    std::span<const std::byte> in_;
    std::size_t pos_ = 0;
    std::size_t family_ = none;
    const std::string* family_name_ = nullptr;
    std::size_t series_ = none;
};

/// Reads a family's spec into `spec` (of the family at `index`, after `previous` if any).
void decode_spec(reader& r,
                 std::size_t index,
                 const family_spec* previous,
                 std::uint32_t version,
                 family_spec& spec);

/// Reads a series of a family of `spec`, as payload `version` lays it out.
series decode_series(reader& r, const family_spec& spec, std::uint32_t version);

/// Series `index`'s sort key for check_unique_series: a hash of its label values as readers
/// show them in the high bits, `index` in the low ones. Taken as the series is read, its
/// strings still in cache.
std::uint64_t series_key(const series& s, std::uint32_t index);

/// Refuses a family with two series of the same label values as readers show them: a reader
/// would serve one series twice, and a remote-write receiver refuses the whole request over
/// it. `keys` holds each series' series_key (sorted here, `scratch` is the sort's), `starts`
/// where each series begins.
void check_unique_series(reader& r,
                         const family_snapshot& f,
                         std::vector<std::uint64_t>& keys,
                         std::vector<std::uint64_t>& scratch,
                         std::span<const std::size_t> starts);

}  // namespace xtel::metrics::detail::codec
