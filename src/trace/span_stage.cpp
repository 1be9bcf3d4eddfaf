#include "xtel/trace/span_stage.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "xtel/core/clock.hpp"

namespace xtel::trace {

using span_ring::set_text;
using span_ring::side;
using span_ring::span_record;

namespace {

std::int32_t rank_field(const std::optional<std::uint64_t>& r) {
    return r && *r <= 0x7fffffffu ? static_cast<std::int32_t>(*r) : -1;
}

/// Whether a record may become a span. A transfer that was neither timed nor failed has no
/// times to show; a notified one (this agent is its target) has none either, and becomes the
/// target's span only in the trace its notification named: on its own it would be a root span
/// of a trace no other span shares. Its sampler decision is by that trace id, never failed or
/// slow, so the target keeps the traces the initiator keeps.
bool candidate(const transfer_record& r) noexcept {
    if (r.notified) {
        return !r.request_id.empty();
    }
    return r.timed || r.attrs.status != transfer_status::success;
}

}  // namespace

span_stage::span_stage(const exporter_context& ctx)
    : span_stage(
          ctx.agent_name, process_rank::from_env(), sampler_settings::from_env(), clock::now_us()) {
}

span_stage::span_stage(std::string agent_name,
                       const process_rank& rank,
                       const sampler_settings& settings,
                       std::uint64_t now_us)
    : on_(settings.spans()),
      agent_name_(std::move(agent_name)),
      rank_(rank_field(rank.rank)),
      local_rank_(rank_field(rank.local_rank)),
      sampler_(settings, now_us) {
    last_id_.reserve(max_request_id);
}

span_record span_stage::make_span(const transfer_record& r,
                                  span_reason reason,
                                  const trace_id& trace,
                                  const std::optional<context>& ctx,
                                  const label_table& labels) {
    span_record s;
    s.trace = trace;
    if (ctx) {
        s.parent = ctx->parent;
        s.trace_flags = ctx->flags;
        s.origin = static_cast<std::uint8_t>(ctx->from);
    }
    s.span = ids_.next_span_id();
    // The record's timestamp is the completion (or the failure); a timed one says how long
    // before it the post started.
    s.end_us = r.timestamp_us;
    s.start_us =
        r.timed && r.xfer_us <= r.timestamp_us ? r.timestamp_us - r.xfer_us : r.timestamp_us;
    s.bytes = r.requests > 1 ? r.bytes / r.requests : r.bytes;
    s.descriptors = r.shape.descriptors;
    s.lanes = r.shape.lanes;
    s.operation = static_cast<std::uint8_t>(r.attrs.op);
    s.kind = static_cast<std::uint8_t>(r.notified ? side::target : side::initiator);
    s.status = static_cast<std::uint8_t>(r.attrs.status);
    s.reason = static_cast<std::uint8_t>(reason);
    s.rank = rank_;
    s.local_rank = local_rank_;
    set_text(s.agent, agent_name_);
    if (r.attrs.remote_agent != 0) {
        set_text(s.remote_agent, labels.name(r.attrs.remote_agent));
    }
    set_text(s.request_id, r.request_id);
    return s;
}

const std::optional<context>& span_stage::context_for(std::string_view request_id) {
    static const std::optional<context> none;
    if (request_id.empty()) {
        return none;
    }
    if (request_id.data() == last_seen_.data() && request_id.size() == last_seen_.size()) {
        return last_context_;
    }
    return read_context(request_id);
}

const std::optional<context>& span_stage::read_context(std::string_view request_id) {
    // A request's blocks share its id: one parse (or one SHA-256) for a run of them.
    if (request_id != last_id_) {
        last_context_ = context_of(request_id);
        last_id_.assign(request_id);  // at most max_request_id bytes: reserved, no allocation
    }
    last_seen_ = request_id;
    return last_context_;
}

void span_stage::sample(std::span<const transfer_record> transfers,
                        const label_table& labels,
                        std::uint64_t now_us) noexcept {
    batch_.clear();
    traces_.clear();
    batch_traces_.clear();
    last_seen_ = {};  // the last call's ids may have been overwritten since
    std::size_t next = 0;
    try {
        for (; next < transfers.size(); ++next) {
            const transfer_record& r = transfers[next];
            if (!candidate(r)) {
                continue;
            }
            const bool failed = r.attrs.status != transfer_status::success;
            const std::optional<context>& ctx = context_for(r.request_id);
            // An untagged transfer is decided on a trace id of its own, so that the sampled
            // fraction holds for it too. A tagged one's is read where its context keeps it, and
            // its entry is written in place: an entry built on the stack, its fields stored
            // apart and read back in 16-byte loads for the copy, stalled the loop on store
            // forwarding (70% of this function's time in BM_transfer_tax/node_tagged).
            trace_id own;
            const trace_id* trace = &own;
            if (ctx) {
                trace = &ctx->trace;
                transfer_trace& t = traces_.emplace_back();
                t.index = next;
                t.trace_id = ctx->trace;
            } else {
                own = ids_.next_trace_id();
            }
            // A record its producer drew for the sampled fraction (untagged: its own trace) is
            // not drawn again.
            const span_reason why =
                sampler_.decide(failed, r.timed ? std::optional(r.xfer_us) : std::nullopt, *trace,
                                now_us, r.head_sampled && !ctx);
            if (why == span_reason::none) {
                continue;
            }
            batch_.push_back(make_span(r, why, *trace, ctx, labels));
            batch_traces_.push_back(ctx ? traces_.size() - 1 : traces_.size());
        }
    } catch (...) {
        // No memory for the batch: this round's remaining candidates are lost, and counted.
        for (; next < transfers.size(); ++next) {
            counts_.dropped_ring += candidate(transfers[next]) ? 1 : 0;
        }
        // A span whose entry could not be kept beside it is this record's: counted above, and
        // left out of the write (shrinking allocates nothing).
        batch_.resize(std::min(batch_.size(), batch_traces_.size()));
    }
    counts_.dropped_budget = sampler_.dropped();
}

void span_stage::taken(bool written) noexcept {
    if (!written) {
        counts_.dropped_ring += batch_.size();  // kept, but no sink could take them
        return;
    }
    for (std::size_t i = 0; i < batch_.size(); ++i) {
        ++counts_.kept[batch_[i].reason & 3];
        if (batch_traces_[i] < traces_.size()) {
            traces_[batch_traces_[i]].span_id = batch_[i].span;  // written: an exemplar may name it
        }
    }
}

span_totals span_stage::totals() const noexcept {
    const auto kept = [this](span_reason r) { return counts_.kept[static_cast<std::size_t>(r)]; };
    return {.failed = kept(span_reason::failed),
            .slow = kept(span_reason::slow),
            .sampled = kept(span_reason::sampled),
            .dropped_budget = counts_.dropped_budget,
            .dropped_ring = counts_.dropped_ring};
}

}  // namespace xtel::trace
