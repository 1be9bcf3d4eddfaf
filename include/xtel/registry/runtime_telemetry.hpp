#pragma once
/// What an engine with its own transport includes to record telemetry: the run-time interface
/// of a pipeline (`runtime_telemetry`) and the factory (`make_telemetry`) that builds the one
/// the NIXL_TELEMETRY_* configuration asks for, through the registry make_agent uses
/// (xtel/agent/agent.hpp). Like xtel/agent/agent.hpp it includes neither the pipeline template nor
/// any exporter: the pipeline behind the interface is one of the precompiled ones
/// (xtel/exporters/pipelines.hpp). It is the registry component's, which links no UCX: a program
/// that makes pipelines and no agent links xtel::registry and needs no UCX library.
///
/// A record call costs one virtual call into that pipeline, whose own record is inline there.
/// A program that knows its exporters when it is compiled can use a pipeline type directly
/// (`xtel::buffer_telemetry`, ...) and make none, at the price of honouring only the variables
/// that pipeline reads.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "xtel/core/config.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/core/telemetry_options.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel {

/// The run-time interface of a telemetry pipeline, whatever its exporters. The record calls
/// are those of `telemetry<Exporters...>` (xtel/core/telemetry.hpp), with the same contracts:
/// noexcept, no lock, no allocation; a full staging ring drops and counts.
class runtime_telemetry {
  public:
    virtual ~runtime_telemetry() = default;

    /// The name the pipeline records for: the flight recorder's file name, the agent_name label.
    virtual const std::string& name() const noexcept = 0;
    /// False for telemetry off, whose record calls do nothing.
    virtual bool enabled() const noexcept = 0;

    /// Records one event stamped now.
    void record(category cat,
                const event_name& name,
                std::uint64_t value,
                value_kind kind = value_kind::sample) noexcept {
        do_record(cat, name, value, kind);
    }

    /// Records one event with a timestamp the caller already holds.
    void record_at(std::uint64_t timestamp_us,
                   category cat,
                   const event_name& name,
                   std::uint64_t value,
                   value_kind kind = value_kind::sample) noexcept {
        do_record_at(timestamp_us, cat, name, value, kind);
    }

    /// Adds to a counter (the event carries the increment).
    void add(category cat, const event_name& name, std::uint64_t delta) noexcept {
        do_record(cat, name, delta, value_kind::counter);
    }

    /// Sets a gauge (the event carries the level).
    void set(category cat, const event_name& name, std::uint64_t value) noexcept {
        do_record(cat, name, value, value_kind::gauge);
    }

    /// Records a completed (or failed) transfer: agent_{tx,rx}_bytes, agent_{tx,rx}_requests_num,
    /// agent_xfer_time and agent_xfer_post_time for exporters of events, the record itself for
    /// exporters of transfers. A failed transfer carries its error kind in `attrs.status`
    /// (failed_with) and makes no byte or time event, as the agent's. `shape` (its descriptors)
    /// goes into its span. PRECONDITION: `attrs` names labels of this pipeline's labels().
    void record_transfer(direction dir,
                         std::uint64_t timestamp_us,
                         std::uint64_t bytes,
                         std::uint64_t requests,
                         std::uint64_t post_us,
                         std::uint64_t xfer_us,
                         const transfer_attributes& attrs = {},
                         std::string_view request_id = {},
                         transfer_shape shape = {}) noexcept {
        do_record_transfer(dir, timestamp_us, bytes, requests, post_us, xfer_us, attrs, request_id,
                           shape);
    }

    /// Records completed transfers whose times were not measured: their bytes and requests
    /// (and a failed one's request id).
    void record_transfer_counts(direction dir,
                                std::uint64_t timestamp_us,
                                std::uint64_t bytes,
                                std::uint64_t requests,
                                const transfer_attributes& attrs = {},
                                std::string_view request_id = {},
                                transfer_shape shape = {}) noexcept {
        do_record_transfer_counts(dir, timestamp_us, bytes, requests, attrs, request_id, shape);
    }

    /// Records a transfer another agent made into (or from) this one's memory, told by its
    /// notification (the target's side): `attrs.remote_agent` is the initiator, `request_id`
    /// its trace (a traceparent or trace id). It makes no event: xtel_notified_transfers_total
    /// counts it, and the span recorder writes it as the target's span. Nothing when no
    /// exporter takes transfer records. Slow path (once per notification).
    void record_notified(std::uint64_t timestamp_us,
                         std::uint64_t bytes,
                         const transfer_attributes& attrs,
                         std::string_view request_id = {}) noexcept {
        do_record_notified(timestamp_us, bytes, attrs, request_id);
    }

    /// The strings transfer attributes refer to; intern() is for slow paths only.
    virtual label_table& labels() noexcept = 0;
    /// Hands everything recorded so far to the exporters now, instead of at the next interval.
    virtual void flush() = 0;
    virtual telemetry_stats stats() const = 0;

  private:
    // One virtual call per record: the public calls above are inline and forward here.
    virtual void do_record(category cat,
                           const event_name& name,
                           std::uint64_t value,
                           value_kind kind) noexcept = 0;
    virtual void do_record_at(std::uint64_t timestamp_us,
                              category cat,
                              const event_name& name,
                              std::uint64_t value,
                              value_kind kind) noexcept = 0;
    virtual void do_record_transfer(direction dir,
                                    std::uint64_t timestamp_us,
                                    std::uint64_t bytes,
                                    std::uint64_t requests,
                                    std::uint64_t post_us,
                                    std::uint64_t xfer_us,
                                    const transfer_attributes& attrs,
                                    std::string_view request_id,
                                    transfer_shape shape) noexcept = 0;
    virtual void do_record_transfer_counts(direction dir,
                                           std::uint64_t timestamp_us,
                                           std::uint64_t bytes,
                                           std::uint64_t requests,
                                           const transfer_attributes& attrs,
                                           std::string_view request_id,
                                           transfer_shape shape) noexcept = 0;
    virtual void do_record_notified(std::uint64_t timestamp_us,
                                    std::uint64_t bytes,
                                    const transfer_attributes& attrs,
                                    std::string_view request_id) noexcept = 0;
};

/// The pipeline for `cfg`, chosen exactly as make_agent chooses an agent's: telemetry off gives
/// one that records nothing; otherwise the exporter set (NIXL_TELEMETRY_EXPORTER, "buffer" when
/// unset; in any order; names that are not built in are plugins) picks the precompiled pipeline.
/// `name` names its files, as an agent's name does. Throws config_error for a name that cannot
/// be a file name or an exporter set that does not exist (the message names the variable, the
/// value and what exists), and what the exporters' set-up throws (config_error for their own
/// variables, exporter_error for a file or a port they cannot have).
std::unique_ptr<runtime_telemetry> make_telemetry(std::string name,
                                                  const config& cfg,
                                                  telemetry_options opts = {});

/// The pipeline the environment asks for (config::from_env(), which throws config_error for a
/// malformed NIXL_TELEMETRY_* variable).
std::unique_ptr<runtime_telemetry> make_telemetry(std::string name);

}  // namespace xtel
