#pragma once
/// The exporter NIXL builds for NIXL_TELEMETRY_EXPORTER=xtel: a NIXL agent becomes an xtel agent
/// on the node, through the back end of an xtel pipeline whose one sink is the node exporter
/// (`<agent name>.metrics` in NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH, else /dev/shm, as
/// xtel/exporters/node.hpp says), which xtel-exporter serves with every other agent of the node.
///
/// NIXL's flush thread drives it: the events between on_batch_begin and on_batch_end are one
/// flush, each mapped as it comes (nixl/event_mapping.hpp, stamped with the flush's begin; the
/// completed transfers summed, nixl/transfer_tallies.hpp) and submitted to the pipeline at its
/// end, on that thread, as one round with the flushes kept since the last round, at most one
/// round every round_interval; an event outside a batch, or from another thread during one, is
/// submitted alone. The pipeline runs no thread of its own.
/// Nothing leaves it as an exception: NIXL would take the engine down with it. A set-up failure
/// (a bad xtel variable, an output directory that is not there) is one log line and an exporter
/// that counts and drops; one the node exporter meets (a directory it cannot write, a live
/// agent of the same name) is its own log line and its disabled state, served as such.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "nixl/event_mapping.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/nixl/abi_v2.hpp"

namespace xtel::nixl {

class xtel_exporter final : public abi_v2::exporter {
  public:
    using pipeline = xtel::telemetry<node_exporter>;

    /// The pipeline is configured as xtel's agents are, from `lookup` (the process environment)
    /// read as if NIXL_TELEMETRY_ENABLE=y and NIXL_TELEMETRY_EXPORTER=node: NIXL loading this
    /// exporter says both. The node exporter reads its own variables from the process
    /// environment.
    /// NIXL's batches are submitted as rounds at most every `round_interval` (each one's
    /// events kept until then, and a batch submitted at once past max_pending records or
    /// events): default_round_interval.
    explicit xtel_exporter(
        const abi_v2::init_params& params,
        const env_lookup& lookup = process_env,
        std::chrono::milliseconds round_interval = default_round_interval) noexcept;

    /// A round is a published snapshot: the model copied, encoded and written to the node
    /// file. NIXL flushes every NIXL_TELEMETRY_RUN_INTERVAL (engines set 10 ms, so that NIXL's
    /// own queue never fills); xtel-exporter reads the file when it is scraped, every second
    /// at most. A round a NIXL flush made the initiator's flush thread spend more than
    /// NIXL's BUFFER exporter did (docs/performance.md); ten a second are as fresh for any
    /// scrape.
    static constexpr std::chrono::milliseconds default_round_interval{100};
    ~xtel_exporter() override;

    abi_v2::status export_event(const abi_v2::event& e) noexcept override;

    /// NIXL's events it could not hand on: no pipeline, no memory, or a round that threw.
    std::uint64_t events_dropped() const noexcept {
        return dropped_.load(std::memory_order_relaxed);
    }
    /// NIXL's events of a kind xtel has no name for (mapped_flush::unmapped).
    std::uint64_t events_unmapped() const noexcept {
        return unmapped_.load(std::memory_order_relaxed);
    }
    /// The pipeline; null when it could not be set up.
    const pipeline* pipeline_or_null() const noexcept { return telemetry_.get(); }

  private:
    void on_batch_begin() noexcept override;
    void on_batch_end() noexcept override;
    /// An event outside this thread's batch, submitted alone. Out of line, so that the batch's
    /// path saves no registers for it (quill's slow path is so).
    [[gnu::noinline]] void export_alone(const abi_v2::event& e) noexcept;
    /// Submits `flush`, mapped from `events` of NIXL's and stamped `now_us` (its tallies), as
    /// one round, and clears it. Holds mutex_.
    void submit(mapped_flush& flush, std::size_t events, std::uint64_t now_us) noexcept;
    /// The batch's last transfer into batch_, which is submitted when `now` or a round is
    /// due (round_interval_ since the last, or max_pending reached), else kept. Holds mutex_.
    void submit_batch(bool now) noexcept;

    /// Guards the pipeline, and the batch while no thread owns it (batch_owner_).
    std::mutex mutex_;
    /// The thread between its on_batch_begin and on_batch_end (a calling_thread() value), or
    /// 0. Only that thread reads or writes the batch (mapper_, batch_, batch_events_) then,
    /// without mutex_: NIXL's flush thread pays no lock an event. Why relaxed loads are enough:
    /// - It is stored only under mutex_, and changed from a thread's value only by that thread
    ///   (its on_batch_end; a begin on another thread leaves it).
    /// - So a thread that loads its own value (relaxed: it needs only to see its own stores,
    ///   which coherence guarantees) is the owner until it stores 0 itself; any other thread
    ///   loads another value, takes mutex_ and leaves the batch alone.
    /// - The owner's writes to the batch reach the next thread to touch it through mutex_: the
    ///   owner's on_batch_end takes it to submit and clear, and stores 0 before it lets go. The
    ///   destructor, which no call may race, takes it too, to submit a batch left open.
    std::atomic<std::uintptr_t> batch_owner_{0};
    /// The current batch, mapped so far, and how many of NIXL's events it took.
    flush_mapper mapper_;
    mapped_flush batch_;
    std::size_t batch_events_ = 0;
    /// An event submitted alone, under mutex_.
    mapped_flush single_;
    std::unique_ptr<pipeline> telemetry_;
    const std::uint64_t round_interval_ns_;
    std::uint64_t last_round_ns_ = 0;  // clock::monotonic_ns() of the last batch submitted
    std::atomic<std::uint64_t> dropped_{0};
    std::atomic<std::uint64_t> unmapped_{0};
};

}  // namespace xtel::nixl
