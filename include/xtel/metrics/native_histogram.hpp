#pragma once
/// Native (exponential) histogram buckets, as Prometheus's native histograms and OpenTelemetry's
/// exponential histograms define them: no bounds to choose, only a resolution.
///
/// At schema s the buckets' bounds are the powers of base = 2^(2^-s); bucket i holds the
/// values in (base^(i-1), base^i] (Prometheus's convention: bucket 0 ends at 1). Schema 3
/// (base 1.0905) puts 8 buckets in each power of two, so any value within a bucket is within
/// (base - 1) / (base + 1) = 4.3% of the bucket's middle; each schema down halves the
/// resolution. OTLP numbers its buckets one lower (bucket i holds (base^i, base^(i+1)]) and
/// calls the schema `scale`.
///
/// Zero and values up to zero_threshold go in the zero bucket. The metric store's values are whole
/// units of 10^-decimals, so the least positive value shown is 10^-18, far above the
/// threshold: only a value of 0 is in the zero bucket.
///
/// A series keeps its buckets dense, from its lowest populated index to its highest, at most
/// max_buckets wide: an observation that would make them wider halves the series' resolution
/// (schema - 1, merging each pair of buckets) until it fits, as OpenTelemetry SDKs do with
/// their 160 buckets. Memory per series is therefore bounded, whatever the values.

#include <cstdint>
#include <span>
#include <vector>

namespace xtel::metrics::native {

inline constexpr int min_schema = -4;
inline constexpr int max_schema = 8;
/// The schema a family gets unless configured: 8 buckets per power of two, at most 4.3% off.
inline constexpr int default_schema = 3;
/// The widest a series' dense buckets grow before its schema goes down.
inline constexpr std::size_t max_buckets = 160;
/// Prometheus's and OpenTelemetry's default zero threshold (2^-128).
inline constexpr double zero_threshold = 0x1p-128;

/// The index of the bucket holding `v` (> zero_threshold, finite) at `schema` (min_schema to
/// max_schema).
std::int32_t bucket_index(double v, int schema) noexcept;

/// The upper bound of bucket `index` at `schema`: base^index.
double upper_bound(std::int32_t index, int schema) noexcept;

/// The index at `schema` - `steps` of bucket `index` at `schema`: each step makes the pair
/// (2k-1, 2k) bucket k, so `steps` steps give ceil(index / 2^steps). Computed wide, so that any
/// int32 index (a node file may hold INT32_MAX) gives its answer without overflow.
constexpr std::int32_t downscaled(std::int32_t index, int steps = 1) noexcept {
    steps = steps < 32 ? steps : 32;  // past 32 steps every int32 index is at 0 or 1 already
    // An arithmetic shift of a negative (C++20): floor, as ceil needs after the added 2^steps-1.
    return static_cast<std::int32_t>((std::int64_t{index} + (std::int64_t{1} << steps) - 1) >>
                                     steps);
}

/// Dense buckets (`counts[k]` is bucket `first` + k) brought `steps` schemas down, as the
/// model's series do when they outgrow max_buckets: the counts merged by downscaled() into
/// `out` (replaced). Returns the first index of `out`. PRECONDITION: `counts` is not empty and
/// `first` + its size - 1 is an int32 (the node codec refuses other series).
std::int32_t downscale_into(std::int32_t first,
                            std::span<const std::uint64_t> counts,
                            int steps,
                            std::vector<std::uint64_t>& out);

/// One run of consecutive buckets in Prometheus's sparse form: `offset` from the end of the
/// run before (from 0 for the first: the first's offset is its first index) and its length.
struct bucket_span {
    std::int32_t offset = 0;
    std::uint32_t length = 0;

    friend bool operator==(const bucket_span&, const bucket_span&) = default;
};

/// Dense buckets (`counts[k]` is bucket `first` + k) in Prometheus's sparse form: runs of
/// buckets separated by gaps of more than 2 empty buckets become spans (shorter gaps are kept
/// as zeros, which costs less than a new span), and each run's counts are given as deltas
/// from the previous count (the first from 0). Empty when every count is 0. Replaces what
/// `spans` and `deltas` held.
void to_spans(std::int32_t first,
              std::span<const std::uint64_t> counts,
              std::vector<bucket_span>& spans,
              std::vector<std::int64_t>& deltas);

}  // namespace xtel::metrics::native
