#include "nixl/transfer_tallies.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xtel::nixl {

bucket_finder::bucket_finder(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()), direct_(direct_values) {
    std::size_t i = 0;
    for (std::size_t v = 0; v < direct_values; ++v) {
        while (i < bounds_.size() && bounds_[i] < static_cast<double>(v)) {
            ++i;
        }
        direct_[v] = static_cast<std::uint16_t>(i);
    }
}

std::size_t bucket_finder::search(std::uint64_t value) const noexcept {
    const auto v = static_cast<double>(value);
    return static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                    bounds_.begin());
}

void flush_tallies::configure(std::span<const double> bounds,
                              const trace::sampler_settings& sampling,
                              std::uint64_t seed) {
    find_ = bucket_finder(bounds);
    for (side& s : sides_) {
        s.xfer.assign(find_.buckets(), 0);
        s.post.assign(find_.buckets(), 0);
    }
    const bool spans = sampling.spans();
    slow_us_ = spans ? sampling.slow_us : UINT64_MAX;
    fraction_ = spans ? std::clamp(sampling.sample, 0.0, 1.0) : 0.0;
    rng_ = seed;
    until_sampled_ = next_gap();
    on_ = true;
}

std::uint64_t flush_tallies::next_gap() noexcept {
    if (fraction_ <= 0) {
        return UINT64_MAX;  // never: UINT64_MAX decrements outlast any agent
    }
    if (fraction_ >= 1) {
        return 1;
    }
    // splitmix64, then U in (0, 1]: the number of trials to the first success is
    // 1 + floor(ln U / ln(1 - p)), which is what drawing each transfer at p gives.
    rng_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = rng_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = (static_cast<double>(z >> 11) + 1.0) * 0x1.0p-53;
    const double gap = std::floor(std::log(u) / std::log1p(-fraction_));
    if (!(gap < 1e18)) {
        return std::numeric_limits<std::uint64_t>::max();
    }
    return 1 + static_cast<std::uint64_t>(gap);
}

std::span<const transfer_tally> flush_tallies::view(std::uint64_t now_us) noexcept {
    std::size_t n = 0;
    for (std::size_t d = 0; d < sides_.size(); ++d) {
        side& s = sides_[d];
        if (s.tally.transfers == 0) {
            continue;
        }
        transfer_tally& t = out_[n++];
        t = s.tally;
        t.timestamp_us = now_us;
        t.dir = d == 1 ? direction::rx : direction::tx;
        // NIXL counts TX for the transfers an agent writes and RX for those it reads.
        t.attrs = {.op = d == 1 ? transfer_op::read : transfer_op::write};
        t.xfer_buckets = s.xfer;
        t.post_buckets = s.post;
    }
    return {out_.data(), n};
}

void flush_tallies::clear() noexcept {
    for (side& s : sides_) {
        s.tally = {};
        std::fill(s.xfer.begin(), s.xfer.end(), 0);
        std::fill(s.post.begin(), s.post.end(), 0);
    }
}

}  // namespace xtel::nixl
