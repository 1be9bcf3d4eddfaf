#include "xtel/metrics/snapshot_codec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "xtel/core/parse.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace xtel::metrics {

namespace {

using limits = snapshot_codec_limits;

constexpr bool reserves_snapshot_labels() {
    for (const std::string_view l : snapshot_label_names) {
        if (std::find(std::begin(reserved_label_names), std::end(reserved_label_names), l) ==
            std::end(reserved_label_names)) {
            return false;
        }
    }
    return true;
}
// So that no family label can be one of the snapshot's: a series would carry it twice.
static_assert(reserves_snapshot_labels(),
              "reserved_label_names holds every name of snapshot_label_names");

constexpr std::string_view metric_name_rule = "[a-zA-Z_:][a-zA-Z0-9_:]*";
constexpr std::string_view label_name_rule = "[a-zA-Z_][a-zA-Z0-9_]*, not starting with __";

constexpr std::byte magic[4] = {std::byte{'X'}, std::byte{'S'}, std::byte{'N'}, std::byte{'P'}};

// The fewest bytes each element can take, so that a count is checked against the bytes left
// before anything is reserved for it: a count of n claims at least n times these.
constexpr std::size_t min_string = 4;
constexpr std::size_t min_label = 2 * min_string;
constexpr std::size_t min_family = 3 * min_string + 3 + 3 * 4;  // 3 strings, 3 bytes, 3 counts
constexpr std::size_t min_series = 4 + 3 * 8 + 2 * 4;           // label count, 3 values, 2 counts
constexpr std::size_t min_exemplar_v1 = 2 * min_string + 2 * 8;
constexpr std::size_t min_exemplar = min_exemplar_v1 + 16 + 8;  // and the trace and span ids

// Little-endian, byte by byte: the same bytes on every host.
class writer {
  public:
    explicit writer(std::vector<std::byte>& out) : out_(out) {}

    void u8(std::uint8_t v) { out_.push_back(std::byte{v}); }
    void u32(std::uint32_t v) { le(v, 4); }
    void u64(std::uint64_t v) { le(v, 8); }
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
        for (const std::uint8_t b : bytes) {
            out_.push_back(std::byte{b});
        }
    }

  private:
    void le(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) {
            out_.push_back(static_cast<std::byte>(v >> (8 * i)));
        }
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

/// A string from the input as a message may quote it: quoted, printable ASCII, cut short, so
/// that what() stays one readable line whatever the bytes.
std::string printable(std::string_view s) {
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

    [[noreturn]] void fail(std::size_t at, std::string_view what) const {
        std::string where;
        if (family_ != none) {
            where = fmt::format("family {}", family_);
            if (family_name_ != nullptr) {
                where += fmt::format(" ({})", printable(*family_name_));
            }
            if (series_ != none) {
                where += fmt::format(" series {}", series_);
            }
            where += ": ";
        }
        throw snapshot_decode_error(
            fmt::format("snapshot payload, byte {}: {}{}", at, where, what));
    }

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

/// The payload's version, one this reader knows.
std::uint32_t decode_header(reader& r) {
    const auto m = r.bytes(sizeof magic, "the magic");
    if (!std::equal(m.begin(), m.end(), std::begin(magic))) {
        r.fail(0, "the magic is not \"XSNP\": not an encoded snapshot");
    }
    const std::uint32_t version = r.u32("the version");
    if (version < snapshot_codec_oldest_version || version > snapshot_codec_version) {
        r.fail(sizeof magic,
               fmt::format("version {} is unknown: this reader knows versions {} to {}", version,
                           snapshot_codec_oldest_version, snapshot_codec_version));
    }
    return version;
}

/// A series' native buckets (version 3, a family with native set): a schema no higher than the
/// family's, at most native::max_buckets buckets whose indexes all fit an int32, holding with
/// the zero bucket every observation of `s.count` and no other.
void decode_native_buckets(reader& r, const family_spec& spec, series& s) {
    const std::size_t schema_at = r.offset();
    s.native_schema = r.i8("the native schema");
    if (s.native_schema < native::min_schema || s.native_schema > spec.native_schema) {
        r.fail(schema_at, fmt::format("the native schema is {}: expected {} to {} (the family's "
                                      "native_schema, or lower once downscaled)",
                                      s.native_schema, native::min_schema, spec.native_schema));
    }
    const std::size_t first_at = r.offset();
    s.native_first = r.i32("native_first");
    const std::size_t zero_at = r.offset();
    s.zero_count = r.u64("zero_count");
    const auto max_buckets = static_cast<std::uint32_t>(native::max_buckets);
    const std::uint32_t n = r.count("the native bucket count", max_buckets, 8);
    // The last bucket's index, first + n - 1, must be an int32 too: readers compute it.
    if (n > 0 && std::int64_t{s.native_first} + n - 1 > INT32_MAX) {
        r.fail(first_at,
               fmt::format("native_first is {} with {} native buckets: the last "
                           "bucket's index {} is past {}: expected every index an "
                           "int32",
                           s.native_first, n, std::int64_t{s.native_first} + n - 1, INT32_MAX));
    }
    s.native_buckets.reserve(n);
    std::uint64_t total = s.zero_count;
    bool overflows = false;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t b = r.u64("a native bucket");
        overflows = overflows || b > UINT64_MAX - total;
        total += b;
        s.native_buckets.push_back(b);
    }
    // Every observation is in the zero bucket or in one native bucket, so a reader can take
    // either the count or the buckets (Prometheus refuses a native histogram whose buckets hold
    // more than its count).
    if (overflows || total != s.count) {
        r.fail(zero_at,
               fmt::format("zero_count and the {} native buckets hold {} observations: "
                           "expected the series' count, {}",
                           n, overflows ? "at least 2^64" : fmt::format("{}", total), s.count));
    }
}

series decode_series(reader& r, const family_spec& spec, std::uint32_t version) {
    series s;
    const bool histogram = spec.type == metric_type::histogram;
    const std::uint32_t labels = r.exact_count("the label value count", spec.label_names.size(),
                                               "one per label name", min_string);
    s.label_values.reserve(labels);
    for (std::uint32_t i = 0; i < labels; ++i) {
        s.label_values.push_back(r.string("a label value"));
    }
    s.value = r.u64("the value");
    s.sum = r.u64("the sum");
    s.count = r.u64("the count");

    const std::uint32_t buckets =
        r.exact_count("the bucket count", spec.bounds.size(),
                      histogram ? "one per bound" : "buckets only for a histogram", 8);
    s.buckets.reserve(buckets);
    for (std::uint32_t i = 0; i < buckets; ++i) {
        s.buckets.push_back(r.u64("a bucket"));
    }

    const std::size_t at = r.offset();
    const std::uint32_t exemplars = r.count("the exemplar count", limits::max_bounds + 1,
                                            version == 1 ? min_exemplar_v1 : min_exemplar);
    if (exemplars != 0 && (!histogram || exemplars != spec.bounds.size() + 1)) {
        r.fail(at, histogram ? fmt::format("the exemplar count is {}: expected 0 or {} (one per "
                                           "bound and one for +Inf)",
                                           exemplars, spec.bounds.size() + 1)
                             : fmt::format("the exemplar count is {}: expected 0 (exemplars only "
                                           "for a histogram)",
                                           exemplars));
    }
    s.exemplars.resize(exemplars);
    for (std::uint32_t i = 0; i < exemplars; ++i) {
        exemplar& e = s.exemplars[i];
        const std::size_t name_at = r.offset();
        e.label_name = r.string("an exemplar's label name");
        e.label_value = r.string("an exemplar's label value");
        // Both empty: the bucket has no exemplar (what the store leaves in one).
        if ((!e.label_name.empty() || !e.label_value.empty()) && !is_label_name(e.label_name)) {
            r.fail(name_at, fmt::format("exemplar {}'s label name {} is not a label name: expected "
                                        "{} (or empty, with an empty value: no exemplar)",
                                        i, printable(e.label_name), label_name_rule));
        }
        e.value = r.u64("an exemplar's value");
        e.timestamp_us = r.u64("an exemplar's timestamp");
        if (version >= 2) {
            r.raw(e.trace_id, "an exemplar's trace id");
            r.raw(e.span_id, "an exemplar's span id");
        }
    }
    if (version >= 3 && spec.native) {
        decode_native_buckets(r, spec, s);
    }
    return s;
}

void decode_bounds(reader& r, family_spec& spec) {
    const std::size_t at = r.offset();
    const std::uint32_t n = r.count("the bound count", limits::max_bounds, 8);
    if (n != 0 && spec.type != metric_type::histogram) {
        r.fail(at, fmt::format("the bound count is {}: expected 0 (bounds only for a histogram, "
                               "this is a {})",
                               n, to_string(spec.type)));
    }
    spec.bounds.reserve(n);
    double shown_before = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::size_t b_at = r.offset();
        const double b = std::bit_cast<double>(r.u64("a bound"));
        if (std::isnan(b)) {
            r.fail(b_at, fmt::format("bound {} is NaN: expected strictly increasing numbers", i));
        }
        if (std::isinf(b)) {
            r.fail(b_at, fmt::format("bound {} is {}: expected finite bounds (the +Inf bucket is "
                                     "implied, readers add it)",
                                     i, b));
        }
        if (i > 0 && !(b > spec.bounds.back())) {
            r.fail(b_at, fmt::format("bound {} is {} after {}: expected strictly increasing bounds",
                                     i, b, spec.bounds.back()));
        }
        const double shown = shown_bound(b, spec.decimals);
        if (i > 0 && !(shown > shown_before)) {
            r.fail(b_at, fmt::format("bound {} is {} after {}: divided by 10^{} as shown, both are "
                                     "{}: expected bounds that differ as shown",
                                     i, b, spec.bounds.back(), spec.decimals, shown));
        }
        spec.bounds.push_back(b);
        shown_before = shown;
    }
}

/// Refuses what a family's label name cannot be (label `index`; those before it are read).
void check_label_name(reader& r,
                      std::size_t at,
                      std::size_t index,
                      const family_spec& spec,
                      const std::string& name) {
    if (!is_label_name(name)) {
        r.fail(at, fmt::format("label name {} {} is not a label name: expected {}", index,
                               printable(name), label_name_rule));
    }
    if (std::find(std::begin(reserved_label_names), std::end(reserved_label_names), name) !=
        std::end(reserved_label_names)) {
        r.fail(at, fmt::format("label name {} {} is reserved: every series has it from the "
                               "snapshot or the reader (agent_name, pid, rank, local_rank, "
                               "instance)",
                               index, printable(name)));
    }
    if (spec.type == metric_type::histogram && name == "le") {
        r.fail(at, fmt::format("label name {} \"le\" is refused in a histogram: its bucket lines "
                               "add le",
                               index));
    }
    if (spec.type == metric_type::summary && name == "quantile") {
        r.fail(at, fmt::format("label name {} \"quantile\" is refused in a summary: it names a "
                               "summary's quantiles",
                               index));
    }
    const auto& names = spec.label_names;
    if (const auto it = std::find(names.begin(), names.begin() + index, name);
        it != names.begin() + index) {
        r.fail(at, fmt::format("label name {} {} is label name {}'s too: expected each name once",
                               index, printable(name), it - names.begin()));
    }
}

/// Whether a family keeps native buckets, and from which schema (version 3).
void decode_native_spec(reader& r, family_spec& spec) {
    const std::size_t native_at = r.offset();
    const std::uint8_t flag = r.u8("native");
    if (flag > 1) {
        r.fail(native_at, fmt::format("native is {}: expected 0 or 1", flag));
    }
    if (flag == 1 && spec.type != metric_type::histogram) {
        r.fail(native_at, fmt::format("native is 1 on a {}: expected 0 (native buckets only for "
                                      "a histogram)",
                                      to_string(spec.type)));
    }
    spec.native = flag == 1;
    const std::size_t schema_at = r.offset();
    spec.native_schema = r.i8("native_schema");
    if (spec.native_schema < native::min_schema || spec.native_schema > native::max_schema) {
        r.fail(schema_at, fmt::format("native_schema is {}: expected {} to {}", spec.native_schema,
                                      native::min_schema, native::max_schema));
    }
}

/// Reads a family's spec into `spec` (of the family at `index`, after `previous` if any).
void decode_spec(reader& r,
                 std::size_t index,
                 const family_spec* previous,
                 std::uint32_t version,
                 family_spec& spec) {
    const std::size_t name_at = r.offset();
    spec.name = r.string("the name");
    if (!is_metric_name(spec.name)) {
        r.fail(name_at, fmt::format("the name {} is not a metric name: expected {}",
                                    printable(spec.name), metric_name_rule));
    }
    r.at_family(index, &spec.name);
    if (previous != nullptr && !(previous->name < spec.name)) {
        r.fail(name_at, fmt::format("the name does not sort after family {}'s {}: expected "
                                    "families sorted by name, each name once",
                                    index - 1, printable(previous->name)));
    }
    spec.help = r.string("the help");

    const std::size_t type_at = r.offset();
    const std::uint8_t type = r.u8("the type");
    if (type > static_cast<std::uint8_t>(metric_type::summary)) {
        r.fail(type_at, fmt::format("the type byte is {}: expected 0 (counter), 1 (gauge), 2 "
                                    "(histogram) or 3 (summary)",
                                    type));
    }
    spec.type = static_cast<metric_type>(type);
    // OpenMetrics shows a counter's samples as <name>_total (and the store makes no other).
    if (spec.type == metric_type::counter && !spec.name.ends_with("_total")) {
        r.fail(name_at, fmt::format("the name {} of a counter does not end in _total: expected "
                                    "a counter's name to end in _total",
                                    printable(spec.name)));
    }

    const std::size_t decimals_at = r.offset();
    spec.decimals = r.u8("the decimals");
    if (spec.decimals > 18) {
        r.fail(decimals_at, fmt::format("decimals is {}: expected 0 to 18", spec.decimals));
    }

    const std::size_t fixed_at = r.offset();
    const std::uint8_t fixed = r.u8("fixed_labels");
    if (fixed > 1) {
        r.fail(fixed_at, fmt::format("fixed_labels is {}: expected 0 or 1", fixed));
    }
    spec.fixed_labels = fixed == 1;

    const std::size_t unit_at = r.offset();
    spec.unit = r.string("the unit");
    if (!is_unit(spec.unit)) {
        r.fail(unit_at, fmt::format("the unit {} is not a unit: expected [a-zA-Z0-9_]* (empty for "
                                    "none)",
                                    printable(spec.unit)));
    }
    if (!spec.unit.empty() &&
        !unit_ends_name(spec.name, spec.unit, spec.type == metric_type::counter)) {
        r.fail(unit_at, fmt::format("the unit {} does not end the name: expected a name ending in "
                                    "_{}{}",
                                    printable(spec.unit), spec.unit,
                                    spec.type == metric_type::counter ? " (before _total)" : ""));
    }
    const std::uint32_t names = r.count("the label name count", limits::max_labels, min_string);
    spec.label_names.reserve(names);
    for (std::uint32_t i = 0; i < names; ++i) {
        const std::size_t at = r.offset();
        std::string name = r.string("a label name");
        check_label_name(r, at, i, spec, name);
        spec.label_names.push_back(std::move(name));
    }
    decode_bounds(r, spec);
    if (version >= 3) {
        decode_native_spec(r, spec);
    }
}

/// A series' sort key: a hash of its label values in the high bits, its index in the low
/// ones (limits::max_series_per_family fits them), taken as the series is read, its strings
/// still in cache.
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

std::uint64_t series_key(const series& s, std::uint32_t index) {
    std::uint64_t h = 0;
    for (const std::string& v : s.label_values) {
        const std::size_t hv =
            is_utf8(v) ? std::hash<std::string>{}(v) : std::hash<std::string>{}(shown_value(v));
        h = (h ^ hv) * 0x100000001b3ull;
    }
    return (h << index_bits) | index;
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

/// Refuses a family with two series of the same label values as readers show them: a reader
/// would serve one series twice, and a remote-write receiver refuses the whole request over
/// it. `keys` holds each series' series_key (sorted here, `scratch` is the sort's), `starts`
/// where each series begins.
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

void decode_families(reader& r, std::vector<family_snapshot>& out, std::uint32_t version) {
    const std::uint32_t n = r.count("the family count", limits::max_families, min_family);
    out.reserve(n);  // so that the reader may point at a family's name while reading it
    // Every line name written so far (name, name_bucket, ...) -> its family: two families may
    // not write lines of one name (histogram x and gauge x_count), or readers serve one series
    // twice.
    std::unordered_map<std::string, std::uint32_t> lines;
    std::vector<std::size_t> starts;
    std::vector<std::uint64_t> keys, scratch;
    for (std::uint32_t i = 0; i < n; ++i) {
        r.at_family(i, nullptr);
        family_snapshot& f = out.emplace_back();
        const std::size_t at = r.offset();
        decode_spec(r, i, i > 0 ? &out[i - 1].spec : nullptr, version, f.spec);
        for (std::string& line : metric_store::line_names(f.spec.name, f.spec.type)) {
            const auto [it, added] = lines.try_emplace(std::move(line), i);
            if (!added) {
                r.fail(at, fmt::format("its line {} is family {}'s ({}) too: expected each line "
                                       "name in one family",
                                       printable(it->first), it->second,
                                       printable(out[it->second].spec.name)));
            }
        }
        const std::uint32_t series_n =
            r.count("the series count", limits::max_series_per_family, min_series);
        f.series.reserve(series_n);
        starts.resize(series_n);
        keys.resize(series_n);
        for (std::uint32_t j = 0; j < series_n; ++j) {
            r.at_series(j);
            starts[j] = r.offset();
            f.series.push_back(decode_series(r, f.spec, version));
            keys[j] = series_key(f.series.back(), j);
        }
        check_unique_series(r, f, keys, scratch, starts);
    }
    r.at_family(reader::none, nullptr);
}

/// The snapshot's own labels: those of snapshot_label_names, each at most once.
void decode_labels(reader& r, std::vector<label>& out) {
    const std::uint32_t n = r.count("the label count", limits::max_labels, min_label);
    out.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::size_t at = r.offset();
        label& l = out[i];
        l.name = r.string("a label's name");
        if (std::find(std::begin(snapshot_label_names), std::end(snapshot_label_names), l.name) ==
            std::end(snapshot_label_names)) {
            r.fail(at, fmt::format("label {}'s name {} is refused: expected agent_name, rank or "
                                   "local_rank (a reader adds pid and instance itself)",
                                   i, printable(l.name)));
        }
        for (std::uint32_t j = 0; j < i; ++j) {
            if (out[j].name == l.name) {
                r.fail(at, fmt::format("label {}'s name {} is label {}'s too: expected each "
                                       "label once",
                                       i, printable(l.name), j));
            }
        }
        l.value = r.string("a label's value");
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

snapshot decode_snapshot(std::span<const std::byte> bytes) {
    reader r(bytes);
    const std::uint32_t version = decode_header(r);
    snapshot s;
    decode_labels(r, s.labels);
    decode_families(r, s.families, version);
    if (r.left() != 0) {
        r.fail(r.offset(),
               fmt::format("{} bytes after the last family: expected the end", r.left()));
    }
    return s;
}

}  // namespace xtel::metrics
