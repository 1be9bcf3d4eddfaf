#pragma once
/// The pipeline's run-time knobs and the counts it keeps about itself: what an agent's
/// options and stats() carry, without the pipeline itself (xtel/core/telemetry.hpp).

#include <cstddef>
#include <cstdint>

namespace xtel {

/// Run-time knobs that are not NIXL variables.
struct telemetry_options {
    /// 32-byte slots each thread can fill between two flushes before it drops (and counts): a
    /// transfer takes one (two when it carries attributes new to the thread's cache, two more
    /// with a request id), an event two. 16,384 slots are 512 KiB a thread.
    std::size_t staging_capacity = 16384;
    /// Most events handed to an exporter in one call.
    std::size_t batch_size = 4096;
    /// Start the flusher thread. Off, events reach the exporters only through flush().
    bool start_flusher = true;
};

/// Counts the pipeline keeps about itself.
struct telemetry_stats {
    std::uint64_t events_exported = 0;  ///< events handed to the exporters
    std::uint64_t records_dropped = 0;  ///< records lost to full staging rings
    std::uint64_t export_errors = 0;    ///< exporter calls that threw
    /// Exporters that turned themselves off (one that cannot write; see xtel/core/exporter.hpp).
    std::uint64_t exporters_disabled = 0;
    /// Events exporters were handed and could not write, summed over the exporters.
    std::uint64_t events_lost = 0;
};

}  // namespace xtel
