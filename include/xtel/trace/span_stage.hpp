#pragma once
/// The back end's span stage (xtel/core/back_end.hpp): on the flusher thread, each round's
/// transfer records go through the sampler (xtel/trace/sampler.hpp) before the fold, and those
/// it keeps become span records, with span ids of their own, for the sinks that take spans
/// (the node exporter writes them into `<dir>/<agent>.spans`, xtel/trace/span_ring.hpp). The
/// decision comes before the fold because the latency exemplars carry the ids of the spans
/// written. Recording threads never reach any of this. docs/trace-format.md has the rules.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/exporter.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::trace {

/// What a stage has done so far: the counters the agent serves on /metrics.
struct span_counts {
    /// Spans written, by reason (index: span_reason; [0] unused).
    std::array<std::uint64_t, 4> kept{};
    /// Spans the budget (NIXL_TELEMETRY_TRACE_BUDGET) left out.
    std::uint64_t dropped_budget = 0;
    /// Spans kept but not written: no sink could take them (the ring's file lost, truncated or
    /// replaced, or a write failed) or there was no memory to build them.
    std::uint64_t dropped_ring = 0;
};

/// Turns one agent's transfer records into spans. Flusher thread only.
class span_stage {
  public:
    /// What it hands the sinks that take spans.
    using span_type = span_ring::span_record;

    /// As the back end builds it: the sampler's variables (NIXL_TELEMETRY_TRACE_*,
    /// sampler_settings::from_env, which throws config_error) and the rank's
    /// (process_rank::from_env), the budget starting full now.
    explicit span_stage(const exporter_context& ctx);
    span_stage(std::string agent_name,
               const process_rank& rank,
               const sampler_settings& settings,
               std::uint64_t now_us);

    span_stage(const span_stage&) = delete;
    span_stage& operator=(const span_stage&) = delete;

    /// Whether spans are configured (a budget above 0): the back end keeps a stage only then.
    bool on() const noexcept { return on_; }

    /// Decides, for each record, whether it becomes a span (failed; timed and at least the slow
    /// threshold; its trace head-sampled; all within the budget), and builds the spans kept
    /// (spans()). A notified record (this agent is the transfer's target) becomes a span of
    /// kind target when it carries a trace and that trace is head-sampled, never as failed or
    /// slow. `now_us` (wall clock, µs since the epoch) feeds the budget. A record stands for
    /// one transfer of `requests` completions: its span carries one completion's bytes.
    void sample(std::span<const transfer_record> transfers,
                const label_table& labels,
                std::uint64_t now_us) noexcept;

    /// The spans the last sample() kept, for the sinks.
    std::span<const span_type> spans() const noexcept { return batch_; }

    /// Whether some sink wrote spans(): they are counted as kept, and the traces name them;
    /// else they are counted in dropped_ring.
    void taken(bool written) noexcept;

    /// The traces of the last sample() call's tagged candidates (timed or failed), in order of
    /// index, with the ids of the spans written for them (after taken()): for the histograms'
    /// exemplars.
    std::span<const transfer_trace> traces() const noexcept { return traces_; }

    const span_counts& counts() const noexcept { return counts_; }
    /// The counts as the model takes them (xtel_trace_spans_total, ..._dropped_total).
    span_totals totals() const noexcept;

  private:
    /// The span of one record, kept for `reason`, in `trace` (ctx's, or the untagged
    /// transfer's own).
    span_type make_span(const transfer_record& r,
                        span_reason reason,
                        const trace_id& trace,
                        const std::optional<context>& ctx,
                        const label_table& labels);

    /// The context of `request_id`, the last one's kept: a request's blocks share its id.
    /// Within one sample() call an id at the same address and of the same size as the last is
    /// the same text (the records' ids do not change during the call, and the back end's round
    /// keeps a run of one id as one copy), so it is not compared again.
    /// Small, so that it is inlined into sample(); read_context has the rest, out of line.
    const std::optional<context>& context_for(std::string_view request_id);
    [[gnu::noinline]] const std::optional<context>& read_context(std::string_view request_id);

    bool on_ = false;
    std::string agent_name_;
    std::int32_t rank_ = -1;
    std::int32_t local_rank_ = -1;
    sampler sampler_;
    id_generator ids_;
    std::vector<span_type> batch_;
    std::vector<transfer_trace> traces_;
    /// For each span of batch_, its entry in traces_ (none: an untagged record's).
    std::vector<std::size_t> batch_traces_;
    std::string last_id_;
    std::optional<context> last_context_;
    /// The id last_id_ was last found equal to, in this sample() call (empty: none yet).
    std::string_view last_seen_;
    span_counts counts_;
};

}  // namespace xtel::trace
