#pragma once
/// The UCX transport behind basic_agent. UCX's own types stay in src/agent/ucx/, so that
/// users' headers need no ucp.h; the agent template calls these out-of-line, non-virtual
/// functions. One backend owns one UCX context and worker, and progresses it only when its
/// owner calls post, poll or progress: there is no progress thread.
///
/// PRECONDITION: one thread at a time calls a backend (the agent's contract).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/agent/agent.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/transfer.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel::detail {

/// What the agent records for one transfer; it lives in the backend's transfer slot, so the
/// clock readings the agent takes around a post, and the attributes it filled when the
/// transfer was created, are at hand without another lookup.
struct transfer_state {
    /// Completions not recorded yet: the backend adds each (in the line it writes anyway),
    /// the agent takes them when it records.
    std::uint64_t unreported = 0;
    std::uint64_t bytes = 0;
    std::uint64_t post_start = 0;  ///< the agent's clock readings (tsc_clock)
    std::uint64_t post_end = 0;
    transfer_attributes attrs;  ///< as given to create_transfer; status stays success here
    direction dir = direction::tx;
    /// Whether the agent took clock readings around the post in flight: post clears it, the
    /// agent sets it after a post it timed.
    bool timed = false;
    /// Whether the agent has this transfer on its list of ones with unreported completions.
    bool listed = false;
    /// Whether the caller gave the transfer a request id (ucx_backend::request_id).
    bool tagged = false;
    /// Its descriptors and its connection's lanes, for its span.
    transfer_shape shape{};
};
// With the slot's state after it, one cache line: a post that is not timed touches nothing
// else of the record (src/agent/ucx lays the slot out so).
static_assert(sizeof(transfer_state) <= 56);

/// What post and poll tell the agent besides the status.
struct transfer_outcome {
    /// What the agent has to look at; none on a post that completed, or is in progress, as
    /// the many before it, so the agent tests one byte after every post.
    enum flag : std::uint8_t {
        new_error = 1,  ///< the status is an error this call found first (one ERROR event)
        failed = 2,     ///< the transfer failed in this call (state set)
        /// It completed, its unreported count left zero, and the agent has not listed it.
        first_unreported = 4,
        /// It completed and notifies its remote agent: the backend sends the notification
        /// itself, on the way out of post or poll (the agent never sees this flag).
        notify = 8,
    };
    /// The transfer's state; set by post when the transfer was posted (completed or not) or
    /// failed, and by poll when it completed or failed in that call; the status tells which.
    transfer_state* state = nullptr;
    std::uint8_t flags = 0;
};

/// Where the backend reports its rare events (start, connections, transports, endpoint
/// failures), the transfers that need the agent's attention (a failure, an error found
/// first, completions that start to wait for recording: transfer_outcome's flags), and the
/// transfers other agents notified it of. Function
/// pointers, called only off the per-transfer path, so a post that completes as the ones
/// before it returns straight to the caller.
struct event_sink {
    using record_fn = void (*)(void* context,
                               category cat,
                               const event_name& name,
                               std::uint64_t value,
                               value_kind kind) noexcept;
    using outcome_fn = void (*)(void* context,
                                const transfer_outcome& outcome,
                                const status& st,
                                transfer_handle h) noexcept;
    /// A transfer another agent made into (or from) this one's memory, told by its
    /// notification; called on the owner's thread, inside progress (or get_notifications).
    using notified_fn = void (*)(void* context, const notification& n) noexcept;

    void* context = nullptr;
    record_fn record = nullptr;
    outcome_fn outcome = nullptr;
    notified_fn notified = nullptr;

    void operator()(category cat,
                    const event_name& name,
                    std::uint64_t value,
                    value_kind kind) const noexcept {
        if (record != nullptr) {
            record(context, cat, name, value, kind);
        }
    }
};

struct backend_options {
    /// A transfer still in progress this long after its post fails with timed_out, and the
    /// connection to its remote agent is closed. Zero: no deadline.
    std::chrono::milliseconds transfer_timeout{30'000};
};

class ucx_backend {
  public:
    /// Starts UCX; throws agent_error when it cannot.
    ucx_backend(std::string_view agent_name, backend_options opts, event_sink sink);
    ~ucx_backend();

    ucx_backend(const ucx_backend&) = delete;
    ucx_backend& operator=(const ucx_backend&) = delete;

    /// Closes connections (transfers still in progress after a second are cancelled),
    /// deregisters memory and stops UCX. The destructor calls it; calling it twice is harmless.
    void shutdown() noexcept;

    status register_memory(const descriptor& region);
    /// Allocates `bytes` of host memory that UCX can share directly with peers on this host
    /// (faster than registering user memory there) and registers it; `out` describes it.
    status allocate_memory(std::uint64_t bytes, descriptor& out);
    /// `region` must be exactly a registered (or allocated) region; allocated memory is freed.
    status deregister_memory(const descriptor& region);
    /// Bytes registered now (allocated regions included).
    std::uint64_t registered_bytes() const noexcept;

    status export_metadata(std::vector<std::byte>& out) const;
    /// Connects to (or refreshes) the agent the blob describes; `remote_name` is its name.
    status load_remote_metadata(std::span<const std::byte> blob, std::string& remote_name);
    status disconnect(std::string_view remote_name);
    /// The regions a loaded remote agent announced in its last metadata.
    status remote_regions(std::string_view remote_name, std::vector<descriptor>& out) const;
    /// Agents loaded and usable now.
    std::size_t connections() const noexcept;

    status create_transfer(transfer_op op,
                           std::span<const descriptor> local,
                           std::span<const descriptor> remote,
                           std::string_view remote_name,
                           const transfer_attributes& attrs,
                           std::string_view request_id,
                           transfer_handle& out,
                           const transfer_tags& tags = {});
    /// The request id a live transfer was created with (at most max_request_id bytes); empty
    /// for none, or for a stale or foreign handle. Valid until the next create_transfer or
    /// release.
    std::string_view request_id(transfer_handle h) noexcept;
    status post(transfer_handle h, transfer_outcome& outcome) noexcept;
    /// Progresses the worker once, then looks at h.
    status poll(transfer_handle h, transfer_outcome& outcome) noexcept;
    /// PRECONDITION-checked: a transfer in progress is not released (busy).
    status release(transfer_handle h);
    /// The record of a live transfer; null for a stale or foreign handle. Valid until the
    /// next create_transfer or release.
    transfer_state* state(transfer_handle h) noexcept;
    /// Progresses the worker once; returns the number of UCX events it handled.
    unsigned progress() noexcept;

    /// agent::send_notification, get_notifications and notifications.
    status send_notification(std::string_view remote_name, std::string_view message);
    status get_notifications(std::vector<notification>& out);
    notification_counts notifications() const noexcept;
    /// Sends raw bytes as a notification (tests: a malformed one goes the way a real one does).
    status send_raw_notification(std::string_view remote_name, std::span<const std::byte> wire);

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Whether this build and machine can register GPU memory: ok, or why not (not_supported).
status vram_support();

}  // namespace xtel::detail
