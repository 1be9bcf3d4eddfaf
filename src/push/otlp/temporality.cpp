#include "push/otlp/temporality.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xtel/metrics/native_histogram.hpp"

namespace xtel::push::detail {

namespace {

namespace pb = xtel::otlp;

/// Every point from its producer's start: nothing to keep.
class cumulative_selector final : public temporality_selector {
  public:
    pb::AggregationTemporality temporality() const noexcept override {
        return pb::AGGREGATION_TEMPORALITY_CUMULATIVE;
    }

    baseline advance(const series_id&, const cumulative_values& now, std::uint64_t) override {
        baseline out;
        out.start_ns = now.start_ns;
        return out;
    }
};

/// Each point what its series gained since the previous export (from its start, the first
/// time and after its producer restarted).
class delta_selector final : public temporality_selector {
  public:
    pb::AggregationTemporality temporality() const noexcept override {
        return pb::AGGREGATION_TEMPORALITY_DELTA;
    }

    baseline advance(const series_id& id,
                     const cumulative_values& now,
                     std::uint64_t now_ns) override {
        auto [at, added] = series_.try_emplace(key_of(id));
        previous& prev = at->second;
        baseline out;
        out.start_ns = now.start_ns;
        if (!added && !restarted(prev, now)) {
            // The previous buckets move to scratch_, where the baseline shows them, and their
            // storage takes the new ones: no allocation once the sizes are seen.
            std::swap(scratch_, prev.buckets);
            std::swap(native_scratch_, prev.native_buckets);
            out = {.start_ns = prev.time_ns,
                   .value = prev.value,
                   .sum = prev.sum,
                   .buckets = scratch_,
                   .since_ns = prev.time_ns,
                   .native = {.schema = prev.native_schema,
                              .first = prev.native_first,
                              .buckets = native_scratch_,
                              .zero_count = prev.zero_count}};
        }
        prev.start_ns = now.start_ns;
        prev.time_ns = now_ns;
        prev.value = now.value;
        prev.sum = now.sum;
        prev.buckets.assign(now.buckets.begin(), now.buckets.end());
        prev.native_schema = now.native.schema;
        prev.native_first = now.native.first;
        prev.native_buckets.assign(now.native.buckets.begin(), now.native.buckets.end());
        prev.zero_count = now.native.zero_count;
        prev.seen = exports_;
        return out;
    }

    // Series no longer served (their agent went) are forgotten: if one comes back, its next
    // point starts afresh from its producer's start.
    void end_export() override {
        std::erase_if(series_, [&](const auto& kv) { return kv.second.seen != exports_; });
        ++exports_;
    }

    std::size_t tracked_series() const noexcept override { return series_.size(); }

  private:
    /// A series' values at the previous export.
    struct previous {
        std::uint64_t start_ns = 0;
        std::uint64_t time_ns = 0;  ///< of the export that sent them
        std::uint64_t value = 0;
        std::uint64_t sum = 0;
        std::vector<std::uint64_t> buckets;
        std::int8_t native_schema = 0;
        std::int32_t native_first = 0;
        std::vector<std::uint64_t> native_buckets;
        std::uint64_t zero_count = 0;
        std::uint64_t seen = 0;  ///< the export that last saw the series
    };

    /// A value that went down (or another producer's start, or other buckets) means the
    /// producer started again: its point then counts from the new start.
    bool restarted(const previous& prev, const cumulative_values& now) {
        if (prev.start_ns != now.start_ns || now.value < prev.value || now.sum < prev.sum ||
            prev.buckets.size() != now.buckets.size()) {
            return true;
        }
        for (std::size_t i = 0; i < now.buckets.size(); ++i) {
            if (now.buckets[i] < prev.buckets[i]) {
                return true;
            }
        }
        return native_went_down(prev, now.native);
    }

    /// Whether a native bucket (or the zero bucket) has fewer observations than before, the
    /// two compared at the lower of their schemas. A schema that went up means a new series.
    bool native_went_down(const previous& prev, const native_counts& now) {
        if (now.zero_count < prev.zero_count || now.schema > prev.native_schema) {
            return true;
        }
        const native_counts was = at_schema({.schema = prev.native_schema,
                                             .first = prev.native_first,
                                             .buckets = prev.native_buckets,
                                             .zero_count = prev.zero_count},
                                            now.schema, downscaled_);
        for (std::size_t k = 0; k < was.buckets.size(); ++k) {
            if (was.buckets[k] == 0) {
                continue;
            }
            const std::int64_t at =
                static_cast<std::int64_t>(was.first) + static_cast<std::int64_t>(k) - now.first;
            if (at < 0 || at >= static_cast<std::int64_t>(now.buckets.size()) ||
                now.buckets[static_cast<std::size_t>(at)] < was.buckets[k]) {
                return true;
            }
        }
        return false;
    }

    const std::string& key_of(const series_id& id) {
        key_ = id.resource_key;
        key_ += id.family;
        for (const std::string& v : id.label_values) {
            key_ += '\x1f';
            key_ += v;
        }
        return key_;
    }

    std::unordered_map<std::string, previous> series_;
    std::uint64_t exports_ = 0;
    std::string key_;                            ///< scratch
    std::vector<std::uint64_t> scratch_;         ///< the baseline's buckets
    std::vector<std::uint64_t> native_scratch_;  ///< the baseline's native buckets
    std::vector<std::uint64_t> downscaled_;      ///< scratch of native_went_down
};

}  // namespace

native_counts at_schema(const native_counts& c, int schema, std::vector<std::uint64_t>& storage) {
    if (c.schema <= schema || c.buckets.empty()) {
        native_counts out = c;
        out.schema = static_cast<std::int8_t>(std::min<int>(c.schema, schema));
        return out;
    }
    // Merged as the metric store merges a series' buckets, so a baseline and a point brought to one
    // schema number their buckets alike.
    const std::int32_t first =
        metrics::native::downscale_into(c.first, c.buckets, c.schema - schema, storage);
    return {.schema = static_cast<std::int8_t>(schema),
            .first = first,
            .buckets = storage,
            .zero_count = c.zero_count};
}

std::unique_ptr<temporality_selector> make_temporality_selector(otlp_temporality t) {
    if (t == otlp_temporality::delta) {
        return std::make_unique<delta_selector>();
    }
    return std::make_unique<cumulative_selector>();
}

}  // namespace xtel::push::detail
