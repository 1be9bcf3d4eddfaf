#include "node/series_count.hpp"

#include <cstring>

#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel::node::detail {

namespace {

/// A cursor over the payload; every step checks the bytes left and says false past the end.
class cursor {
  public:
    explicit cursor(std::span<const std::byte> in) : in_(in) {}

    bool at_end() const noexcept { return pos_ == in_.size(); }
    std::size_t left() const noexcept { return in_.size() - pos_; }

    bool skip(std::uint64_t n) noexcept {
        if (n > in_.size() - pos_) {
            return false;
        }
        pos_ += static_cast<std::size_t>(n);
        return true;
    }
    bool u8(std::uint8_t& v) noexcept {
        if (in_.size() - pos_ < 1) {
            return false;
        }
        v = std::to_integer<std::uint8_t>(in_[pos_++]);
        return true;
    }
    bool u32(std::uint32_t& v) noexcept {
        if (in_.size() - pos_ < 4) {
            return false;
        }
        v = 0;
        for (int i = 0; i < 4; ++i) {
            v |= std::to_integer<std::uint32_t>(in_[pos_++]) << (8 * i);
        }
        return true;
    }
    /// Skips a string: its u32 length, then that many bytes.
    bool string() noexcept {
        std::uint32_t n = 0;
        return u32(n) && skip(n);
    }
    bool strings(std::uint64_t n) noexcept {
        for (std::uint64_t i = 0; i < n; ++i) {
            if (!string()) {
                return false;
            }
        }
        return true;
    }

  private:
    std::span<const std::byte> in_;
    std::size_t pos_ = 0;
};

/// The fewest bytes a series takes (its label value count, value, sum, count, bucket and
/// exemplar counts): a series count the bytes left cannot hold is not believed.
constexpr std::size_t min_series = 4 + 3 * 8 + 2 * 4;

/// Skips one series of a family with `label_names` label names (and native buckets when
/// `native`); false when the bytes end first or it has another number of label values.
bool skip_series(cursor& c, std::uint32_t label_names, std::uint32_t version, bool native) {
    std::uint32_t n = 0;
    if (!c.u32(n) || n != label_names || !c.strings(n) || !c.skip(3 * 8)) {
        return false;
    }
    if (!c.u32(n) || !c.skip(std::uint64_t{n} * 8)) {  // buckets
        return false;
    }
    // Exemplars: two strings, a value and a timestamp each; from version 2 the trace and span
    // ids too.
    if (!c.u32(n)) {
        return false;
    }
    const std::uint64_t fixed = version == 1 ? 2 * 8 : 2 * 8 + 16 + 8;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (!c.strings(2) || !c.skip(fixed)) {
            return false;
        }
    }
    // Version 3, a native family: schema, first index, zero count, then the native buckets.
    if (native && (!c.skip(1 + 4 + 8) || !c.u32(n) || !c.skip(std::uint64_t{n} * 8))) {
        return false;
    }
    return true;
}

}  // namespace

std::optional<std::uint64_t> count_time_series(std::span<const std::byte> payload,
                                               std::uint64_t stop_above) {
    using metrics::metric_type;
    cursor c(payload);
    constexpr char magic[4] = {'X', 'S', 'N', 'P'};
    if (payload.size() < sizeof magic || std::memcmp(payload.data(), magic, sizeof magic) != 0) {
        return std::nullopt;
    }
    std::uint32_t version = 0;
    std::uint32_t labels = 0;
    std::uint32_t families = 0;
    if (!c.skip(sizeof magic) || !c.u32(version) ||
        version < metrics::snapshot_codec_oldest_version ||
        version > metrics::snapshot_codec_version || !c.u32(labels) ||
        !c.strings(2 * std::uint64_t{labels}) || !c.u32(families)) {
        return std::nullopt;
    }
    std::uint64_t total = 0;
    for (std::uint32_t f = 0; f < families; ++f) {
        std::uint8_t type = 0;
        std::uint32_t label_names = 0;
        std::uint32_t bounds = 0;
        std::uint32_t series = 0;
        std::uint8_t native = 0;
        // name, help, type, decimals, fixed_labels, unit, label names, bounds, from version 3
        // native and native_schema, series.
        if (!c.strings(2) || !c.u8(type) || !c.skip(2) || !c.string() || !c.u32(label_names) ||
            !c.strings(label_names) || !c.u32(bounds) || !c.skip(std::uint64_t{bounds} * 8) ||
            (version >= 3 && (!c.u8(native) || !c.skip(1))) || !c.u32(series) ||
            series > c.left() / min_series) {
            return std::nullopt;
        }
        std::uint64_t each = 1;
        if (type == static_cast<std::uint8_t>(metric_type::histogram)) {
            // The text form's lines: a native histogram is one series in protobuf, but in text
            // (and for a native-only one, with no bounds) its +Inf bucket, _sum and _count.
            each = std::uint64_t{bounds} + 3;
        } else if (type == static_cast<std::uint8_t>(metric_type::summary)) {
            each = 2;
        }
        total += each * series;
        if (total > stop_above) {
            return total;
        }
        for (std::uint32_t s = 0; s < series; ++s) {
            if (!skip_series(c, label_names, version, native == 1)) {
                return std::nullopt;
            }
        }
    }
    if (!c.at_end()) {
        return std::nullopt;
    }
    return total;
}

}  // namespace xtel::node::detail
