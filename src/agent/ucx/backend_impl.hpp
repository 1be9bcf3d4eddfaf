#pragma once
/// ucx_backend's implementation (private to src/agent/ucx/): its data, and its functions by the
/// file that defines them. UCX's types stay here, out of the public header.
///
/// context.cpp      UCX start-up (settings, context, worker), the start-up events, shutdown
/// memory.cpp       registering, allocating and deregistering local memory
/// connections.cpp  metadata export and load, endpoints, disconnects, endpoint failures
/// transfers.cpp    the transfer slots: create, post, poll, release, progress
/// notifications.cpp  notifications: encoding at create, sending after a completion, receiving
///
/// The per-transfer path (post, poll and what they call on every call) is in transfers.cpp, one
/// translation unit with the public functions that call it, so that it compiles as it did when
/// all of this was one file; what it reaches only on failure lives with its concern.

#include <ucp/api/ucp.h>

#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/metadata.hpp"
#include "xtel/agent/ucx_backend.hpp"
#include "xtel/core/ring.hpp"

namespace xtel::detail {

/// Helpers the backend's files share.
namespace ucx {

/// Builds an error status; formatting runs out of memory only in a process already in
/// trouble, and then the status keeps its code without a message rather than throwing.
template <class... Args>
status fail(status_code code, fmt::format_string<Args...> f, Args&&... args) noexcept {
    try {
        return status(code, fmt::format(f, std::forward<Args>(args)...));
    } catch (...) {
        return status(code, std::string());
    }
}

std::string describe(const descriptor& d);

/// The active message id of notifications; both sides of a transfer use it.
inline constexpr unsigned notification_am_id = 7;

/// How a UCX failure reads to the agent's user.
status_code code_of(ucs_status_t s) noexcept;

/// Agents alive in this process, by incarnation. UCX cannot see that an agent in the same
/// process went away (its shared-memory checks watch the process, which lives on), and a write
/// into memory that a destroyed agent freed would corrupt the heap; so transfers to an agent in
/// this process check its flag here. Leaked on purpose: agents may be destroyed after static
/// destructors have run.
class local_agents {
  public:
    static local_agents& instance();

    std::shared_ptr<std::atomic<bool>> add(std::uint64_t incarnation);
    std::shared_ptr<const std::atomic<bool>> find(std::uint64_t incarnation) const;
    void remove(std::uint64_t incarnation);

  private:
    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, std::shared_ptr<std::atomic<bool>>> live_;
};

}  // namespace ucx

struct ucx_backend::impl {
    struct local_region {
        descriptor desc;
        ucp_mem_h memh = nullptr;
        std::vector<std::byte> rkey;
        bool allocated = false;
        std::uint32_t users = 0;  ///< operations of live transfers that use it
    };

    struct remote_region {
        descriptor desc;
        std::vector<std::byte> packed;
        ucp_rkey_h rkey = nullptr;
        bool current = true;  ///< false once a refreshed metadata no longer lists it
    };

    struct remote_agent {
        impl* owner = nullptr;
        std::string name;
        std::uint64_t incarnation = 0;
        ucp_ep_h ep = nullptr;
        std::vector<remote_region> regions;
        /// Set when the remote agent lives in this process (see local_agents).
        std::shared_ptr<const std::atomic<bool>> alive;
        bool failed = false;
        bool closed = false;
        /// The UCX lanes of its endpoint, all transports together (at most 255 counted).
        std::uint8_t lanes = 0;
        status failure;

        bool usable() const noexcept {
            return !failed && !closed && (!alive || alive->load(std::memory_order_acquire));
        }
    };

    struct rma_op {
        void* local;
        std::uint64_t remote;
        std::size_t length;
        ucp_rkey_h rkey;
        ucp_mem_h memh;
        local_region* region;
    };

    enum class state : std::uint8_t { free, created, in_progress, done, failed };

    /// A transfer's slot. Laid out for post: the first line holds what the agent counts and
    /// the slot's state; the second what post reads to issue the operations.
    struct alignas(cache_line) transfer {
        transfer_state info;  // what the agent keeps of it
        std::uint32_t generation = 1;
        state st = state::free;
        transfer_op op = transfer_op::write;
        /// transfer_outcome::notify when each completion notifies the remote agent, else 0:
        /// a completion ORs it into its flags, so transfers without one take no branch for it.
        std::uint8_t notify = 0;
        std::shared_ptr<remote_agent> remote;
        std::vector<rma_op> ops;
        std::uint32_t idle_polls = 0;
        void* request = nullptr;  ///< the flush request while in progress
        std::uint64_t deadline_us = 0;
        status failure;
        /// The caller's request or trace id (transfer_tags); info.tagged says there is one.
        std::string request_id;
        /// The encoded notification each completion sends (notify set); shared with the sends
        /// UCX has not finished, so a release does not free bytes UCX still reads.
        std::shared_ptr<const std::vector<std::byte>> notification;
    };
    static_assert(offsetof(transfer, notify) < cache_line &&
                  offsetof(transfer, remote) >= cache_line);

    /// A notification UCX took but has not finished sending, with the bytes it reads.
    struct pending_send {
        void* request = nullptr;
        std::shared_ptr<const std::vector<std::byte>> wire;
    };

    // ---- start-up and shutdown (context.cpp) ------------------------------------------------

    impl(std::string_view agent_name, backend_options opts, event_sink s);
    ~impl();
    void start_context();
    void start_worker();
    void teardown_ucx() noexcept;
    void shutdown() noexcept;
    bool any_running() const noexcept;
    void cancel_all() noexcept;
    void wait_and_free(void*& req) noexcept;

    // ---- memory (memory.cpp) -----------------------------------------------------------------

    local_region* find_local(const descriptor& d) noexcept;
    status check_new_region(const descriptor& d) const;
    status map(const descriptor& d, bool allocate, descriptor& out);
    status register_memory(const descriptor& d);
    status allocate_memory(std::uint64_t bytes, descriptor& out);
    status deregister_memory(const descriptor& d);

    // ---- metadata and connections (connections.cpp) ------------------------------------------

    static void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t st);
    void endpoint_failed(remote_agent& r, status why) noexcept;
    /// Closes the connections whose endpoints failed inside the last progress. Here, not in
    /// connections.cpp: post and poll reach it through progress_once, inlined as before.
    void close_failed() noexcept {
        auto pending = std::move(to_close);
        to_close.clear();
        for (remote_agent* r : pending) {
            close(*r);
        }
    }
    void close(remote_agent& r) noexcept;
    void note_disconnect() noexcept;
    std::uint64_t usable_connections() const noexcept;
    status remote_gone(remote_agent& r) noexcept;
    status export_metadata(std::vector<std::byte>& out) const;
    status unpack(remote_agent& r, std::vector<metadata_region>& from);
    static void sort_regions(remote_agent& r);
    status load(std::span<const std::byte> blob, std::string& remote_name);
    status refresh(remote_agent& r, agent_metadata& md);
    status connect(agent_metadata& md,
                   std::shared_ptr<const std::atomic<bool>> remote_alive,
                   std::shared_ptr<remote_agent>& out);
    /// Also keeps the endpoint's lane count in `r`.
    void announce(remote_agent& r);
    status disconnect(std::string_view remote_name);
    status regions_of(std::string_view remote_name, std::vector<descriptor>& out) const;

    // ---- transfers (transfers.cpp) -----------------------------------------------------------

    /// Progresses the worker once; closes the connections that failed inside it.
    unsigned progress_once() noexcept {
        const unsigned n = ::ucp_worker_progress(worker);
        if (!to_close.empty()) [[unlikely]] {
            close_failed();
        }
        return n;
    }

    static const remote_region* find_remote(const remote_agent& r, const descriptor& d) noexcept;
    status create(transfer_op op,
                  std::span<const descriptor> local_descs,
                  std::span<const descriptor> remote_descs,
                  std::string_view remote_name,
                  const transfer_attributes& attrs,
                  std::string_view request_id,
                  transfer_handle& out,
                  const transfer_tags& tags);
    status make_ops(std::span<const descriptor> local_descs,
                    std::span<const descriptor> remote_descs,
                    const remote_agent& remote,
                    std::string_view remote_name,
                    std::vector<rma_op>& ops,
                    std::uint64_t& bytes);
    status take_slot(std::uint32_t& index);
    status release(transfer_handle h);
    void free_orphans() noexcept;

    // The per-transfer path: declared inline, defined in transfers.cpp (the only file that
    // calls them), so the compiler weighs inlining them into post and poll as it did when they
    // were defined in the class.
    inline transfer* find(transfer_handle h) noexcept;
    inline status unknown(transfer_handle h) const noexcept;
    inline status fail_transfer(transfer& t, status why, transfer_outcome& outcome) noexcept;
    inline status post(transfer_handle h, transfer_outcome& outcome) noexcept;
    /// Sends a completed transfer's notification, then hands the rest of a flagged outcome to
    /// the agent (post and poll, on their way out).
    [[gnu::noinline]] void notify(transfer_outcome& outcome,
                                  const status& st,
                                  transfer_handle h) noexcept {
        if ((outcome.flags & transfer_outcome::notify) != 0) {
            send_transfer_notification(h);
            outcome.flags &= static_cast<std::uint8_t>(~transfer_outcome::notify);
        }
        if (outcome.flags != 0 && sink.outcome != nullptr) {
            sink.outcome(sink.context, outcome, st, h);
        }
    }
    static inline void count_completion(transfer& t, transfer_outcome& outcome) noexcept;
    inline status transfer_error(transfer& t, ucs_status_t st) noexcept;
    inline status poll(transfer_handle h, transfer_outcome& outcome) noexcept;
    inline status still_running(transfer& t, transfer_outcome& outcome) noexcept;

    // ---- notifications (notifications.cpp) ---------------------------------------------------

    status encode_transfer_notification(transfer_op op,
                                        std::uint64_t bytes,
                                        std::size_t descriptors,
                                        const transfer_tags& tags,
                                        std::shared_ptr<const std::vector<std::byte>>& out);
    void send_transfer_notification(transfer_handle h) noexcept;
    status send_notification(std::string_view remote_name, std::string_view message);
    status send_raw(std::string_view remote_name, std::shared_ptr<const std::vector<std::byte>> w);
    status send_wire(remote_agent& r, std::shared_ptr<const std::vector<std::byte>> wire) noexcept;
    void sweep_sends() noexcept;
    static ucs_status_t on_notification(void* arg,
                                        const void* header,
                                        std::size_t header_length,
                                        void* data,
                                        std::size_t length,
                                        const ucp_am_recv_param_t* param);
    void receive(std::span<const std::byte> wire, bool rendezvous) noexcept;
    status get_notifications(std::vector<notification>& out);

    // ---- data --------------------------------------------------------------------------------

    std::string name;
    backend_options options;
    event_sink sink;
    std::uint64_t incarnation;
    std::shared_ptr<std::atomic<bool>> alive;

    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_address_t* address = nullptr;
    std::size_t address_length = 0;

    std::map<std::uint64_t, local_region> local;  ///< by start address
    std::uint64_t registered = 0;
    std::map<std::string, std::shared_ptr<remote_agent>, std::less<>> remotes;
    std::vector<remote_agent*> to_close;
    std::vector<transfer> transfers;
    std::vector<std::uint32_t> free_slots;
    std::vector<void*> orphans;
    std::uint32_t posts = 0;
    // Notifications (notifications.cpp).
    std::vector<notification> inbox;  ///< received, not yet taken by get_notifications
    std::vector<pending_send> sends;
    notification_counts notified;
    bool malformed_logged = false;
    bool overflow_logged = false;
    std::vector<std::string> unsent_logged;  ///< peers whose failed send was logged
    static constexpr std::uint32_t progress_every_posts = 32;  // a power of two
};

}  // namespace xtel::detail
