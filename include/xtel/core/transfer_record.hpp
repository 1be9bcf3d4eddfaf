#pragma once
/// What a completed transfer carries besides its numbers: the attributes operators slice
/// metrics by. Strings (backend, peer, GPU) travel as ids of the pipeline's label table, so the
/// attributes are two words that the staging ring caches (ring.hpp) and the hot path copies no
/// string.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "xtel/core/label_table.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/transfer.hpp"

namespace xtel {

/// Which way a transfer's bytes went, as seen by the agent that records it.
enum class direction : std::uint8_t { tx, rx };

/// How a transfer ended: success, or failed with the error kind of its status_code (the same
/// numbers: remote_disconnected, timed_out, ...). `error` is a failure of no known kind.
enum class transfer_status : std::uint8_t { success = 0, error = 1 };

/// The status of a transfer that failed with `code` (error for ok and in_progress, which are
/// not failures).
constexpr transfer_status failed_with(status_code code) noexcept {
    return code > status_code::in_progress && static_cast<std::size_t>(code) < status_code_count
               ? static_cast<transfer_status>(code)
               : transfer_status::error;
}

/// The error kind of a failed transfer; nullopt-like `ok` for success, `in_progress` standing
/// for "failed, kind not known".
constexpr status_code error_kind(transfer_status s) noexcept {
    return static_cast<status_code>(s);
}

/// "success", the error kind's name ("timed_out"), or "error" when the kind is not known.
constexpr std::string_view to_string(transfer_status s) noexcept {
    if (s == transfer_status::success) {
        return "success";
    }
    if (s == transfer_status::error) {
        return "error";
    }
    return to_string(error_kind(s));
}

/// 16 bytes: fits the staged record beside the transfer's numbers.
struct transfer_attributes {
    label_id backend = 0;
    label_id remote_agent = 0;
    label_id gpu = 0;
    transfer_op op = transfer_op::write;
    memory_kind local_memory = memory_kind::dram;
    memory_kind remote_memory = memory_kind::dram;
    transfer_status status = transfer_status::success;

    friend bool operator==(const transfer_attributes&, const transfer_attributes&) = default;
};
static_assert(sizeof(transfer_attributes) == 16);

/// What a transfer is made of, for its span: its descriptors (counted up to 65535: more reads
/// 65535) and the UCX lanes of the connection it went over (0: not known).
struct transfer_shape {
    std::uint16_t descriptors = 0;
    std::uint8_t lanes = 0;

    friend bool operator==(const transfer_shape&, const transfer_shape&) = default;
};

/// A transfer as the flusher hands it to exporters that ask for transfers (see exporter.hpp).
struct transfer_record {
    std::uint64_t timestamp_us = 0;
    std::uint64_t bytes = 0;
    std::uint64_t requests = 0;
    std::uint64_t post_us = 0;
    std::uint64_t xfer_us = 0;
    direction dir = direction::tx;
    transfer_attributes attrs;
    /// Whether post_us and xfer_us were measured, for one transfer of the record. An agent
    /// that samples transfer times (config::timing_sample) reports the transfers it did not
    /// time as records with requests and bytes only: times 0, timed false.
    bool timed = true;
    /// Whether another agent initiated it and told this one by a notification (this agent is
    /// its target): remote_agent is the initiator, requests 1, not timed. Such a record is not
    /// a transfer this agent made: the agent's transfer families and metrics builders never see
    /// it (xtel_notified_transfers_total counts it), and the span recorder writes it as the
    /// target's span.
    bool notified = false;
    /// Its descriptors and lanes, as the agent gave them (zero: not given).
    transfer_shape shape{};
    /// The request or trace id the caller gave the transfer, for exemplars; empty when none.
    /// Valid for the exporter call it is handed to. Filled on timed and on failed records
    /// only: the agent passes the id given to create_transfer (transfer_tags, at most
    /// max_request_id bytes) with the timed completion or the failure, and the pipeline stages
    /// it beside the record.
    std::string_view request_id{};
    /// Whether its producer already drew it for the head-sampled fraction of untagged
    /// transfers (NIXL_TELEMETRY_TRACE_SAMPLE), as one that sums the rest does (transfer_tally):
    /// the span stage keeps it as sampled, within the budget, without drawing again.
    bool head_sampled = false;
};

/// Completed transfers of one set of attributes and direction that their producer summed
/// itself, for a pipeline whose sinks serve the metric model only: what the model's transfer
/// families and latency histograms take from them, without a record each. A host library's
/// exporter hands thousands of untagged transfers a flush (NIXL's plug-in), all of one set of
/// attributes: as records, each would be copied, grouped, offered to the span stage and tallied
/// one by one. The transfers that may become spans (slow, sampled, failed) travel as records.
struct transfer_tally {
    std::uint64_t timestamp_us = 0;
    direction dir = direction::tx;
    /// Completed transfers' attributes: status success.
    transfer_attributes attrs;
    /// The records it stands for, their requests and bytes.
    std::uint64_t transfers = 0;
    std::uint64_t requests = 0;
    std::uint64_t bytes = 0;
    /// Of them, those whose times were measured, and the sums of their times.
    std::uint64_t timed = 0;
    std::uint64_t xfer_us = 0;
    std::uint64_t post_us = 0;
    /// The timed ones counted by bucket of the model's latency bounds (the index of the first
    /// bound not below the value; the last count is +Inf's), transfer and post time: empty when
    /// none was timed, else one more count than the bounds.
    std::span<const std::uint64_t> xfer_buckets{};
    std::span<const std::uint64_t> post_buckets{};
    /// The last transfer's bytes per request (0: it had no requests), and the last timed one's
    /// times: the last-value gauges.
    std::uint64_t last_bytes = 0;
    std::uint64_t last_xfer_us = 0;
    std::uint64_t last_post_us = 0;
};

/// The trace of one of a round's tagged transfer records, as the back end's span stage read it
/// from the request id (xtel/trace/span_stage.hpp), and the span it wrote for the record, if any:
/// what the latency histograms' exemplars carry so that a bucket links to its span.
struct transfer_trace {
    /// The record's index in the round.
    std::size_t index = 0;
    std::array<std::uint8_t, 16> trace_id{};
    /// All zero: no span was written for the record (not sampled, over the budget, lost).
    std::array<std::uint8_t, 8> span_id{};
};

/// What the back end's span stage has done so far (xtel/trace/span_stage.hpp), as the model
/// serves it: xtel_trace_spans_total{reason} and xtel_trace_spans_dropped_total{reason}.
struct span_totals {
    std::uint64_t failed = 0, slow = 0, sampled = 0;  ///< spans written, by reason
    std::uint64_t dropped_budget = 0;                 ///< left out by NIXL_TELEMETRY_TRACE_BUDGET
    std::uint64_t dropped_ring = 0;                   ///< kept, but no sink could take them
};

}  // namespace xtel
