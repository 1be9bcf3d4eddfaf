// encode_snapshot: a snapshot as the bytes docs/node-format.md lays out.

#include "xtel/metrics/snapshot_codec.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <vector>

#include "metrics/snapshot_codec_layout.hpp"

namespace xtel::metrics {

namespace {

using detail::codec::magic;

// Little-endian, byte by byte: the same bytes on every host.
class writer {
  public:
    explicit writer(std::vector<std::byte>& out) : out_(out) {}

    void u8(std::uint8_t v) { out_.push_back(std::byte{v}); }
    void u32(std::uint32_t v) { le<4>(v); }
    void u64(std::uint64_t v) { le<8>(v); }
    /// Two's complement, as the unsigned of the same width.
    void i8(std::int8_t v) { u8(static_cast<std::uint8_t>(v)); }
    void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
    void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
    void count(std::size_t n) { u32(static_cast<std::uint32_t>(n)); }
    void string(std::string_view s) {
        count(s.size());
        const auto* p = reinterpret_cast<const std::byte*>(s.data());
        out_.insert(out_.end(), p, p + s.size());
    }
    /// Bytes as they are (ids: no byte order).
    template <std::size_t N>
    void raw(const std::array<std::uint8_t, N>& bytes) {
        const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
        out_.insert(out_.end(), p, p + N);
    }

  private:
    // Made whole and appended once, not pushed byte by byte: a push_back a byte (a bound check
    // and a size update each) was most of a snapshot's encoding, published every round
    // (BM_nixl_flush_paired, docs/performance.md).
    template <std::size_t N>
    void le(std::uint64_t v) {
        std::array<std::byte, N> bytes;
        for (std::size_t i = 0; i < N; ++i) {
            bytes[i] = static_cast<std::byte>(v >> (8 * i));
        }
        out_.insert(out_.end(), bytes.begin(), bytes.end());
    }

    std::vector<std::byte>& out_;
};

/// `kept[i]` says whether label i of the family is written (empty: all are); `native`, whether
/// the family keeps native buckets (then so does every series).
void encode_series(writer& w, const series& s, const std::vector<bool>& kept, bool native) {
    if (kept.empty()) {
        w.count(s.label_values.size());
        for (const auto& v : s.label_values) {
            w.string(v);
        }
    } else {
        w.count(static_cast<std::size_t>(std::count(kept.begin(), kept.end(), true)));
        for (std::size_t i = 0; i < s.label_values.size(); ++i) {
            if (kept[i]) {
                w.string(s.label_values[i]);
            }
        }
    }
    w.u64(s.value);
    w.u64(s.sum);
    w.u64(s.count);
    w.count(s.buckets.size());
    for (const auto b : s.buckets) {
        w.u64(b);
    }
    w.count(s.exemplars.size());
    for (const auto& e : s.exemplars) {
        w.string(e.label_name);
        w.string(e.label_value);
        w.u64(e.value);
        w.u64(e.timestamp_us);
        w.raw(e.trace_id);
        w.raw(e.span_id);
    }
    if (native) {
        w.i8(s.native_schema);
        w.i32(s.native_first);
        w.u64(s.zero_count);
        w.count(s.native_buckets.size());
        for (const auto b : s.native_buckets) {
            w.u64(b);
        }
    }
}

/// Which of `spec`'s labels are written: all (empty) unless one is in `left_out`.
std::vector<bool> kept_labels(const family_spec& spec, std::span<const std::string_view> left_out) {
    if (left_out.empty() || spec.label_names.empty()) {
        return {};
    }
    std::vector<bool> kept(spec.label_names.size());
    bool leaves_one_out = false;
    for (std::size_t i = 0; i < kept.size(); ++i) {
        kept[i] =
            std::find(left_out.begin(), left_out.end(), spec.label_names[i]) == left_out.end();
        leaves_one_out = leaves_one_out || !kept[i];
    }
    if (!leaves_one_out) {
        kept.clear();
    }
    return kept;
}

void encode_family(writer& w,
                   const family_snapshot& f,
                   std::span<const std::string_view> left_out) {
    const family_spec& spec = f.spec;
    const std::vector<bool> kept = kept_labels(spec, left_out);
    w.string(spec.name);
    w.string(spec.help);
    w.u8(static_cast<std::uint8_t>(spec.type));
    w.u8(spec.decimals);
    w.u8(spec.fixed_labels ? 1 : 0);
    w.string(spec.unit);
    w.count(kept.empty() ? spec.label_names.size()
                         : static_cast<std::size_t>(std::count(kept.begin(), kept.end(), true)));
    for (std::size_t i = 0; i < spec.label_names.size(); ++i) {
        if (kept.empty() || kept[i]) {
            w.string(spec.label_names[i]);
        }
    }
    w.count(spec.bounds.size());
    for (const auto b : spec.bounds) {
        w.f64(b);
    }
    w.u8(spec.native ? 1 : 0);
    w.i8(spec.native_schema);
    w.count(f.series.size());
    for (const auto& s : f.series) {
        encode_series(w, s, kept, spec.native);
    }
}

}  // namespace

void encode_snapshot(const snapshot& s, std::vector<std::byte>& out) {
    encode_snapshot(s, out, {});
}

void encode_snapshot(const snapshot& s,
                     std::vector<std::byte>& out,
                     std::span<const std::string_view> left_out_labels) {
    out.clear();
    writer w(out);
    out.insert(out.end(), std::begin(magic), std::end(magic));
    w.u32(snapshot_codec_version);
    w.count(s.labels.size());
    for (const auto& l : s.labels) {
        w.string(l.name);
        w.string(l.value);
    }
    w.count(s.families.size());
    for (const auto& f : s.families) {
        encode_family(w, f, left_out_labels);
    }
}

}  // namespace xtel::metrics
