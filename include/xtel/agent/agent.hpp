#pragma once
/// What a program includes to make an agent: the run-time interface of an agent (`agent`), its
/// options, and the factory (`make_agent`) that builds one from the NIXL_TELEMETRY_*
/// configuration. It includes neither the UCX backend nor any exporter: the agent behind the
/// interface, `basic_agent<Telemetry>` (xtel/agent/basic_agent.hpp), is compiled once in src/ for
/// every pipeline the factory hands out (xtel/exporters/pipelines.hpp).
///
/// An agent is used by one thread at a time. UCX progresses only inside post, poll and
/// progress, on the calling thread; the agent starts no thread of its own besides the
/// telemetry flusher.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/telemetry_options.hpp"
#include "xtel/core/transfer.hpp"

namespace xtel {

struct agent_options {
    /// A transfer still in progress this long after its post fails with timed_out and closes
    /// the connection to its remote agent (peer failures UCX detects end it sooner). Zero: no
    /// deadline.
    std::chrono::milliseconds transfer_timeout{30'000};
    /// The pipeline's own knobs (staging capacity, batch size, flusher thread).
    telemetry_options telemetry{};
};

/// A notification a remote agent sent this one (get_notifications): after a transfer it made
/// (transfer_tags::notify) or on its own (send_notification).
struct notification {
    std::string remote_agent;  ///< the agent that sent it
    std::string message;       ///< the bytes it attached, as they were
    /// Whether it follows a transfer; then op, descriptors and bytes are what that transfer
    /// moved, as its initiator counted them (one completion), and zero otherwise.
    bool transfer = false;
    transfer_op op = transfer_op::write;
    std::uint32_t descriptors = 0;
    std::uint64_t bytes = 0;
    /// Whether the transfer's request id was a W3C traceparent or trace id: its trace id and
    /// parent span id (zero for a bare trace id), so the target can join the same trace.
    bool traced = false;
    std::array<std::uint8_t, 16> trace_id{};
    std::array<std::uint8_t, 8> span_id{};
};

/// What an agent did with notifications since it started.
struct notification_counts {
    std::uint64_t sent = 0;        ///< handed to UCX
    std::uint64_t unsent = 0;      ///< UCX refused them (each failure is logged, once per peer)
    std::uint64_t received = 0;    ///< decoded and queued for get_notifications
    std::uint64_t malformed = 0;   ///< dropped: not a notification of this format (logged once)
    std::uint64_t overflowed = 0;  ///< dropped: max_queued_notifications unread (logged once)
};

/// Notifications received and not yet taken by get_notifications, at most; past it new ones
/// are dropped and counted, so a target that never polls cannot be made to grow without bound.
inline constexpr std::size_t max_queued_notifications = 65536;

/// The run-time interface of an agent, whatever its telemetry pipeline.
class agent {
  public:
    virtual ~agent() = default;

    /// The name other agents know this one by; also the flight recorder's file name.
    virtual const std::string& name() const noexcept = 0;

    /// Registers memory the caller owns so that transfers may use it and remote agents may
    /// read and write it (once they load this agent's metadata again).
    virtual status register_memory(const descriptor& region) = 0;
    /// Allocates and registers host memory that UCX shares directly with agents on this host,
    /// faster there than registered user memory; deregister_memory frees it.
    virtual status allocate_memory(std::uint64_t bytes, descriptor& out) = 0;
    /// Deregisters exactly a region registered or allocated before; busy while transfers use it.
    virtual status deregister_memory(const descriptor& region) = 0;

    /// This agent's metadata (name, UCX address, registered regions) as a blob for other
    /// agents' load_remote_metadata, in this process or another.
    virtual status export_metadata(std::vector<std::byte>& blob) const = 0;
    /// Connects to the agent a blob describes (or refreshes its regions); `remote_name` gets
    /// its name. A malformed blob is bad_metadata.
    virtual status load_remote_metadata(std::span<const std::byte> blob,
                                        std::string& remote_name) = 0;
    /// Closes the connection to a remote agent; busy while transfers to it are in progress.
    virtual status disconnect(std::string_view remote_agent) = 0;
    /// The regions a loaded remote agent announced (its addresses), sorted by address.
    virtual status remote_regions(std::string_view remote_agent,
                                  std::vector<descriptor>& out) const = 0;

    /// Prepares a transfer of local[i] to or from remote[i] for every i; it can be posted many
    /// times. READ brings remote memory here (counted as rx), WRITE sends it (tx). `tags` may
    /// name the request the transfer serves: its timed posts then carry the id to the
    /// exporters (the latency histograms' exemplars).
    virtual status create_transfer(transfer_op op,
                                   std::span<const descriptor> local,
                                   std::span<const descriptor> remote,
                                   std::string_view remote_agent,
                                   transfer_handle& out,
                                   const transfer_tags& tags = {}) = 0;
    /// Starts the transfer: ok when it completed at once, in_progress, or an error.
    virtual status post(transfer_handle h) noexcept = 0;
    /// Progresses UCX once and reports on the transfer: in_progress, ok, or its error.
    virtual status poll(transfer_handle h) noexcept = 0;
    /// Forgets the transfer; busy while it is in progress.
    virtual status release(transfer_handle h) = 0;
    /// Progresses UCX once without a transfer to look at: an agent whose memory others use
    /// calls it while it waits, since some transports need the target's help. Returns how many
    /// UCX events it handled.
    virtual unsigned progress() noexcept = 0;

    /// Sends `message` (at most max_notification bytes) to a loaded remote agent on its own,
    /// not tied to a transfer (NIXL's genNotif): ok once UCX took it.
    virtual status send_notification(std::string_view remote_agent, std::string_view message) = 0;
    /// Progresses UCX once, then appends the notifications received since the last call to
    /// `out`, in the order they arrived from each sender (NIXL's getNotifs).
    virtual status get_notifications(std::vector<notification>& out) = 0;
    virtual notification_counts notifications() const noexcept = 0;

    /// Hands the recorded events to the exporters now, instead of at the next interval.
    virtual void flush_telemetry() = 0;
    virtual telemetry_stats stats() const = 0;
    /// False for an agent built with telemetry off.
    virtual bool telemetry_enabled() const noexcept = 0;
};

/// An agent for `cfg`: telemetry off gives an agent that records nothing; otherwise the set
/// of exporter names (NIXL_TELEMETRY_EXPORTER, "buffer" when unset; in any order) picks the
/// precompiled pipeline. Names that are not built in are plugins. Throws config_error when a
/// name is neither (the message names the variable, the value and what exists), and what the
/// agent's constructor throws (config_error, agent_error).
std::unique_ptr<agent> make_agent(std::string name, const config& cfg, agent_options opts = {});

/// An agent configured from the environment (config::from_env()).
std::unique_ptr<agent> make_agent(std::string name);

}  // namespace xtel
