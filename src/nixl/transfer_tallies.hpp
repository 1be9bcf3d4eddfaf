#pragma once
/// One NIXL flush's transfers summed by direction (xtel::transfer_tally), for the plug-in's
/// pipeline, whose one sink serves the metric model: a NIXL transfer carries no peer and no
/// request, so all of an agent's transfers of one direction fall in one group, and handing each
/// to the back end as a record (copied, grouped, offered to the span stage, tallied) was most of
/// the plug-in's time on NIXL's flush thread (docs/performance.md, issue 47 item 6).
///
/// The transfers that may become spans still travel as records: the timed ones at or above the
/// slow threshold, and the head-sampled fraction, drawn here at NIXL_TELEMETRY_TRACE_SAMPLE's
/// fraction (the record marked head_sampled, so that the span stage does not draw again). With
/// spans off (NIXL_TELEMETRY_TRACE_BUDGET=0) every transfer is summed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "xtel/core/transfer_record.hpp"
#include "xtel/trace/sampler.hpp"

namespace xtel::nixl {

/// The bucket of a value on a histogram's bounds, as the metric store finds it (the first bound
/// not below the value; bounds.size() for +Inf): by a table for the values below
/// `direct_values` (nearly every NIXL time, in µs), by a binary search above.
class bucket_finder {
  public:
    static constexpr std::size_t direct_values = 4096;

    bucket_finder() = default;
    /// `bounds` strictly increasing, at most 65534 of them.
    explicit bucket_finder(std::span<const double> bounds);

    std::size_t buckets() const noexcept { return bounds_.size() + 1; }

    std::size_t operator()(std::uint64_t value) const noexcept {
        if (value < direct_values) [[likely]] {
            return direct_[value];
        }
        return search(value);
    }

  private:
    std::size_t search(std::uint64_t value) const noexcept;

    std::vector<double> bounds_;
    std::vector<std::uint16_t> direct_;
};

/// A flush's tallies, a direction each.
class flush_tallies {
  public:
    /// Off: every transfer a record (take() says false).
    flush_tallies() = default;

    /// Sums transfers from now on, with times counted on `bounds` (the model's
    /// agent_metrics::latency_bounds()), and keeps as records those `sampling` would make
    /// spans of. `seed` seeds the head-sampling draws.
    void configure(std::span<const double> bounds,
                   const trace::sampler_settings& sampling,
                   std::uint64_t seed);

    bool on() const noexcept { return on_; }

    /// Adds a completed transfer to its direction's tally; false, adding nothing, when it must
    /// travel as a record: one that may become a span (timed, and slow or drawn for the
    /// sampled fraction; the draw is in `head_sampled`), or any while off.
    bool take(direction dir,
              std::uint64_t bytes,
              std::uint64_t requests,
              bool timed,
              std::uint64_t post_us,
              std::uint64_t xfer_us,
              bool& head_sampled) noexcept {
        head_sampled = false;
        if (!on_) {
            return false;
        }
        if (timed) {
            if (xfer_us >= slow_us_) [[unlikely]] {
                return false;
            }
            if (--until_sampled_ == 0) [[unlikely]] {
                until_sampled_ = next_gap();
                head_sampled = true;
                return false;
            }
        }
        side& s = sides_[dir == direction::rx ? 1 : 0];
        ++s.tally.transfers;
        s.tally.requests += requests;
        s.tally.bytes += bytes;
        s.tally.last_bytes = requests == 1 ? bytes : requests == 0 ? 0 : bytes / requests;
        if (timed) {
            ++s.tally.timed;
            s.tally.xfer_us += xfer_us;
            s.tally.post_us += post_us;
            ++s.xfer[find_(xfer_us)];
            ++s.post[find_(post_us)];
            s.tally.last_xfer_us = xfer_us;
            s.tally.last_post_us = post_us;
        }
        return true;
    }

    /// The tallies of the transfers taken since clear(), stamped `now_us`, for the pipeline's
    /// submit: valid until the next take() or clear().
    std::span<const transfer_tally> view(std::uint64_t now_us) noexcept;

    /// Starts the next flush's sums (the head-sampling draws go on).
    void clear() noexcept;

  private:
    struct side {
        transfer_tally tally;
        std::vector<std::uint64_t> xfer;
        std::vector<std::uint64_t> post;
    };

    /// Transfers to the next head-sampled one: 1 + a geometric draw at the sampled fraction.
    std::uint64_t next_gap() noexcept;

    bool on_ = false;
    std::uint64_t slow_us_ = UINT64_MAX;
    double fraction_ = 0;
    std::uint64_t rng_ = 0;
    std::uint64_t until_sampled_ = UINT64_MAX;
    bucket_finder find_;
    std::array<side, 2> sides_{};
    std::array<transfer_tally, 2> out_{};
};

}  // namespace xtel::nixl
