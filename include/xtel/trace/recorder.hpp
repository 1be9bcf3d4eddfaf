#pragma once
/// The agent's side of the spans: on its flusher thread, after each flush round, the transfer
/// records of the round go through the sampler (xtel/trace/sampler.hpp), and those it keeps are
/// written as span records into the agent's span ring, `<dir>/<agent>.spans`, beside its node
/// file (xtel/trace/span_ring.hpp). The node exporter owns one when it publishes; recording
/// threads never reach any of this. docs/trace-format.md has the rules.

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/label_table.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::trace {

/// What a recorder has done so far: the counters the agent serves on /metrics.
struct span_counts {
    /// Spans written to the ring, by reason (index: span_reason; [0] unused).
    std::array<std::uint64_t, 4> kept{};
    /// Spans the budget (NIXL_TELEMETRY_TRACE_BUDGET) left out.
    std::uint64_t dropped_budget = 0;
    /// Spans kept but not written: the ring's file was lost (truncated, replaced) or a write
    /// failed; the recorder writes nothing more from then on.
    std::uint64_t dropped_ring = 0;
};

/// Turns one agent's transfer records into spans. Flusher thread only.
class span_recorder {
  public:
    /// Creates the agent's span ring in `dir`. Throws what span_ring::writer throws (a live
    /// writer of the same name, a directory it cannot write in).
    span_recorder(const std::filesystem::path& dir,
                  std::string agent_name,
                  const process_rank& rank,
                  const sampler_settings& settings,
                  std::uint64_t now_us,
                  std::uint32_t slot_count = span_ring::default_slot_count);

    span_recorder(const span_recorder&) = delete;
    span_recorder& operator=(const span_recorder&) = delete;

    /// Decides, for each record, whether it becomes a span (failed; timed and at least the slow
    /// threshold; its trace head-sampled; all within the budget), and writes the spans kept, in
    /// one write. A notified record (this agent is the transfer's target) becomes a span of
    /// kind target when it carries a trace and that trace is head-sampled, never as failed or
    /// slow. `now_us` (wall clock, µs since the epoch) feeds the budget. A record stands
    /// for one transfer of `requests` completions: its span carries one completion's bytes.
    void record(std::span<const transfer_record> transfers,
                const label_table& labels,
                std::uint64_t now_us) noexcept;

    /// The traces of the last record() call's tagged candidates (timed or failed), in order of
    /// index, with the ids of the spans written for them: for the histograms' exemplars.
    std::span<const transfer_trace> traces() const noexcept { return traces_; }

    const span_counts& counts() const noexcept { return counts_; }
    const std::filesystem::path& path() const noexcept { return writer_.path(); }
    /// True once the ring's file was lost or a write failed (the writer logged why).
    bool failed() const noexcept { return writer_.failed(); }

  private:
    /// The span of one record, kept for `reason`, in `trace` (ctx's, or the untagged
    /// transfer's own).
    span_ring::span_record make_span(const transfer_record& r,
                                     span_reason reason,
                                     const trace_id& trace,
                                     const std::optional<context>& ctx,
                                     const label_table& labels);

    /// The context of `request_id`, the last one's kept: a request's blocks share its id.
    const std::optional<context>& context_for(std::string_view request_id);

    std::string agent_name_;
    std::int32_t rank_ = -1;
    std::int32_t local_rank_ = -1;
    sampler sampler_;
    id_generator ids_;
    span_ring::writer writer_;
    std::vector<span_ring::span_record> batch_;
    std::vector<transfer_trace> traces_;
    /// For each span of batch_, its entry in traces_ (none: an untagged record's).
    std::vector<std::size_t> batch_traces_;
    std::string last_id_;
    std::optional<context> last_context_;
    span_counts counts_;
};

}  // namespace xtel::trace
