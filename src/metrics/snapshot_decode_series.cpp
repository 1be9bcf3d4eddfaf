// Reading a series: its label values, value, sum, count, buckets, exemplars and, from version
// 3 in a native family, its native buckets.

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "metrics/snapshot_codec_layout.hpp"
#include "metrics/snapshot_decode.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace xtel::metrics::detail::codec {

namespace {

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

}  // namespace

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

}  // namespace xtel::metrics::detail::codec
