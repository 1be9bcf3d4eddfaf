#include "xtel/metrics/native_histogram.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace xtel::metrics::native {

namespace {

/// For schema s > 0: the 2^s bounds within one power of two, as fractions of it in [0.5, 1):
/// bound j is 2^(j / 2^s - 1). frexp splits a value into such a fraction and an exponent, so a
/// bucket is the exponent's and a search among these bounds.
struct fraction_bounds {
    std::array<std::array<double, 256>, max_schema + 1> at{};

    fraction_bounds() {
        for (int s = 1; s <= max_schema; ++s) {
            const int n = 1 << s;
            for (int j = 0; j < n; ++j) {
                at[s][j] = std::exp2(static_cast<double>(j) / n - 1);
            }
        }
    }
};

const fraction_bounds& bounds() {
    static const fraction_bounds b;
    return b;
}

}  // namespace

std::int32_t bucket_index(double v, int schema) noexcept {
    int exp = 0;
    const double frac = std::frexp(v, &exp);  // v = frac * 2^exp, frac in [0.5, 1)
    if (schema > 0) {
        const int n = 1 << schema;
        const double* b = bounds().at[schema].data();
        const auto j = static_cast<std::int32_t>(std::lower_bound(b, b + n, frac) - b);
        return j + (exp - 1) * n;
    }
    // A power of two ends its bucket: 2^k (frac 0.5) is in bucket k - 1 at schema 0.
    std::int32_t key = frac == 0.5 ? exp - 1 : exp;
    const int shift = -schema;
    return (key + (1 << shift) - 1) >> shift;
}

double upper_bound(std::int32_t index, int schema) noexcept {
    return std::exp2(std::ldexp(static_cast<double>(index), -schema));
}

std::int32_t downscale_into(std::int32_t first,
                            std::span<const std::uint64_t> counts,
                            int steps,
                            std::vector<std::uint64_t>& out) {
    const auto index = [first](std::size_t k) {
        return static_cast<std::int32_t>(std::int64_t{first} + static_cast<std::int64_t>(k));
    };
    const std::int32_t low = downscaled(first, steps);
    const std::int32_t high = downscaled(index(counts.size() - 1), steps);
    out.assign(static_cast<std::size_t>(std::int64_t{high} - low + 1), 0);
    for (std::size_t k = 0; k < counts.size(); ++k) {
        out[static_cast<std::size_t>(std::int64_t{downscaled(index(k), steps)} - low)] += counts[k];
    }
    return low;
}

void to_spans(std::int32_t first,
              std::span<const std::uint64_t> counts,
              std::vector<bucket_span>& spans,
              std::vector<std::int64_t>& deltas) {
    spans.clear();
    deltas.clear();
    std::int32_t next = 0;       // the index after the last span's end
    std::uint64_t previous = 0;  // the last count written, for the deltas
    std::size_t k = 0;
    while (k < counts.size()) {
        if (counts[k] == 0) {
            ++k;
            continue;
        }
        // A run from k: extends over gaps of at most 2 empty buckets.
        std::size_t end = k + 1;  // one past the run's last non-empty bucket
        for (std::size_t i = end; i < counts.size() && i - end <= 2; ++i) {
            if (counts[i] != 0) {
                end = i + 1;
            }
        }
        const auto index = first + static_cast<std::int32_t>(k);
        spans.push_back(
            {spans.empty() ? index : index - next, static_cast<std::uint32_t>(end - k)});
        for (std::size_t i = k; i < end; ++i) {
            deltas.push_back(static_cast<std::int64_t>(counts[i] - previous));
            previous = counts[i];
        }
        next = first + static_cast<std::int32_t>(end);
        k = end;
    }
}

}  // namespace xtel::metrics::native
