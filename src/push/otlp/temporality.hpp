#pragma once
/// The temporality of OTLP's sums and histograms, chosen once by a selector object: the
/// conversion of a point subtracts the baseline the selector gives and never asks which
/// temporality it is writing (private to src/push/).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "otlp_metrics.pb.h"
#include "xtel/push/otlp.hpp"

namespace xtel::push::detail {

/// Which series a counter or histogram point is of: its resource's label values (joined), its
/// family, its label values.
struct series_id {
    std::string_view resource_key;
    std::string_view family;
    std::span<const std::string> label_values;
};

/// A histogram's native buckets as the metric store keeps them (metrics::series): `buckets[k]` is
/// bucket `first + k` (Prometheus's numbering) at `schema`; the observations of 0 apart.
struct native_counts {
    std::int8_t schema = 0;
    std::int32_t first = 0;
    std::span<const std::uint64_t> buckets;
    std::uint64_t zero_count = 0;
};

/// `c` at the lower `schema` (each step down merges pairs of buckets, as the metric store does when
/// its buckets grow too wide); the buckets in `storage`, which the result's span shows. `c`
/// itself when its schema is not above `schema`.
native_counts at_schema(const native_counts& c, int schema, std::vector<std::uint64_t>& storage);

/// A counter's or histogram's cumulative values now, as the metric store keeps them.
struct cumulative_values {
    std::uint64_t start_ns = 0;  ///< the producer's start: another one means a restart
    std::uint64_t value = 0;     ///< counter; histogram: count
    std::uint64_t sum = 0;       ///< histogram
    std::span<const std::uint64_t> buckets;
    native_counts native{};  ///< a histogram with native buckets
};

/// What a point is measured from: its start, and the values it subtracts from the cumulative
/// ones (none: it is cumulative itself).
struct baseline {
    std::uint64_t start_ns = 0;
    std::uint64_t value = 0;
    std::uint64_t sum = 0;
    std::span<const std::uint64_t> buckets;  ///< shorter than the point's: 0 for the rest
    std::uint64_t since_ns = 0;              ///< exemplars not after it were sent already
    /// Native buckets to subtract, at their own schema, which may be above the point's (the
    /// model lowers a series' schema as its buckets widen): brought to the lower of the two
    /// first. No buckets and no zero count: nothing to subtract.
    native_counts native{};
};

/// Picks each point's baseline. One per encoder, used from one thread.
class temporality_selector {
  public:
    virtual ~temporality_selector() = default;

    /// What the sums and histograms say of their points.
    virtual xtel::otlp::AggregationTemporality temporality() const noexcept = 0;

    /// The baseline of `id`'s point at `now_ns` whose values are `now`; `now` becomes the
    /// series' next baseline. The result is valid until the next call.
    virtual baseline advance(const series_id& id,
                             const cumulative_values& now,
                             std::uint64_t now_ns) = 0;

    /// An export is done: what it did not see is forgotten.
    virtual void end_export() {}

    /// Series whose previous values are kept.
    virtual std::size_t tracked_series() const noexcept { return 0; }
};

/// Cumulative points (from the producer's start) or delta ones (since the previous export).
std::unique_ptr<temporality_selector> make_temporality_selector(otlp_temporality t);

}  // namespace xtel::push::detail
