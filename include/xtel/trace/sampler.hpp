#pragma once
/// Which transfers become spans: every failed one, every timed one slower than an absolute
/// threshold, a head-sampled fraction decided from the trace id (so that both sides of a
/// transfer decide alike without talking), all within a budget of spans per second per agent
/// whose overflow is counted. docs/trace-format.md ("Which transfers become spans") says why.

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "xtel/core/config.hpp"
#include "xtel/trace/context.hpp"

namespace xtel::trace {

namespace env {
/// Microseconds from post to completion at or above which a timed transfer becomes a span.
inline constexpr const char* trace_slow_us = "NIXL_TELEMETRY_TRACE_SLOW_US";
/// The fraction of traces whose transfers all become spans, from 0 to 1.
inline constexpr const char* trace_sample = "NIXL_TELEMETRY_TRACE_SAMPLE";
/// Spans per second one agent writes at most; what goes past it is dropped and counted.
inline constexpr const char* trace_budget = "NIXL_TELEMETRY_TRACE_BUDGET";
}  // namespace env

/// The largest NIXL_TELEMETRY_TRACE_SLOW_US: an hour.
inline constexpr std::uint64_t max_slow_us = 3'600'000'000;
/// The largest NIXL_TELEMETRY_TRACE_BUDGET.
inline constexpr std::uint64_t max_budget = 1'000'000;

struct sampler_settings {
    /// 10 ms: a KV block moves in tens to hundreds of microseconds over RDMA, a whole prompt's
    /// cache in a few milliseconds; ten milliseconds is a stall a request's latency shows.
    std::uint64_t slow_us = 10'000;
    /// One trace in a hundred: a baseline of normal transfers to compare slow ones with.
    double sample = 0.01;
    /// 1000 spans a second per agent: at a few hundred bytes a span, well under a megabyte a
    /// second of OTLP per agent, and eight agents a node stay far inside what one OpenTelemetry
    /// collector takes; a failure storm (a peer gone: every transfer fails) is cut there and
    /// counted instead of flooding the collector.
    /// 0: no spans at all (the agent makes no span ring).
    std::uint64_t budget = 1000;

    /// Whether the agent writes spans at all.
    bool spans() const noexcept { return budget > 0; }

    /// Reads the NIXL_TELEMETRY_TRACE_* variables (env above); unset ones keep their defaults.
    /// Throws config_error naming the variable, quoting its value and saying what is accepted.
    static sampler_settings from_env(const env_lookup& lookup = process_env);
};

/// Why a transfer becomes a span; none: it does not.
enum class span_reason : std::uint8_t { none = 0, failed = 1, slow = 2, sampled = 3 };

/// The label value the counters carry ("failed", "slow", "sampled"; "none").
constexpr std::string_view to_string(span_reason r) noexcept {
    switch (r) {
        case span_reason::failed:
            return "failed";
        case span_reason::slow:
            return "slow";
        case span_reason::sampled:
            return "sampled";
        default:
            return "none";
    }
}

/// The rejection threshold of a head-sampled fraction: 2^56 - round(fraction * 2^56), the
/// threshold of OpenTelemetry's consistent probability sampling.
std::uint64_t sample_threshold(double fraction) noexcept;

/// True when a trace is in the head-sampled fraction whose threshold is `threshold`: the trace
/// id's last 7 bytes, read as a big-endian number, are at or above it.
inline bool head_sampled(const trace_id& trace, std::uint64_t threshold) noexcept {
    // The last 7 bytes, big-endian: the 8 from byte 8 in one load, byte 8 masked off.
    std::uint64_t word = 0;
    std::memcpy(&word, trace.data() + 8, sizeof word);
    if constexpr (std::endian::native == std::endian::little) {
        word = __builtin_bswap64(word);
    }
    return (word & 0x00ff'ffff'ffff'ffffu) >= threshold;
}

/// The decisions of one agent (its flusher: not for concurrent use). reason() and decide() are
/// inline: the span stage asks them of every candidate transfer of a round.
class sampler {
  public:
    /// The budget starts full (one second's worth) at `now_us`.
    sampler(const sampler_settings& settings, std::uint64_t now_us) noexcept;

    /// Why a transfer becomes a span before the budget is asked: failed, else slow (only a
    /// timed transfer has a duration), else sampled, else none.
    /// `drawn`: the transfer's producer drew it for the sampled fraction already.
    span_reason reason(bool failed,
                       std::optional<std::uint64_t> duration_us,
                       const trace_id& trace,
                       bool drawn = false) const noexcept {
        if (failed) {
            return span_reason::failed;
        }
        if (duration_us && *duration_us >= settings_.slow_us) {
            return span_reason::slow;
        }
        if (drawn || head_sampled(trace, threshold_)) {
            return span_reason::sampled;
        }
        return span_reason::none;
    }

    /// reason(), then the budget at `now_us`: none when there is no reason, or when the budget
    /// is spent (the span is dropped and counted in dropped()).
    span_reason decide(bool failed,
                       std::optional<std::uint64_t> duration_us,
                       const trace_id& trace,
                       std::uint64_t now_us,
                       bool drawn = false) noexcept {
        const span_reason r = reason(failed, duration_us, trace, drawn);
        if (r == span_reason::none) {
            return r;
        }
        if (!take_token(now_us)) {
            ++dropped_;
            return span_reason::none;
        }
        ++kept_[static_cast<std::size_t>(r)];
        return r;
    }

    /// Spans dropped because the budget was spent: xtel_trace_spans_dropped_total{reason="budget"}.
    std::uint64_t dropped() const noexcept { return dropped_; }
    /// Spans kept for `reason`: xtel_trace_spans_total{reason="failed"|"slow"|"sampled"}.
    std::uint64_t kept(span_reason reason) const noexcept {
        return kept_[static_cast<std::size_t>(reason) & 3];
    }

    const sampler_settings& settings() const noexcept { return settings_; }

  private:
    /// Takes one span's token, refilling the bucket for the time since the last call.
    bool take_token(std::uint64_t now_us) noexcept;

    sampler_settings settings_;
    std::uint64_t threshold_;
    /// In millionths of a span, so that a budget refills by whole microseconds exactly.
    std::uint64_t tokens_;
    std::uint64_t last_us_;
    std::uint64_t dropped_ = 0;
    std::array<std::uint64_t, 4> kept_{};
};

}  // namespace xtel::trace
