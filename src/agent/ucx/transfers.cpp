// The transfer slots: create and release (set-up time), and the per-transfer path, post and
// poll, with the public functions that call it in the same translation unit (see
// backend_impl.hpp).

#include <algorithm>
#include <limits>

#include "agent/ucx/backend_impl.hpp"
#include "xtel/core/clock.hpp"

namespace xtel::detail {

using namespace ucx;

// ---- create and release -------------------------------------------------------------------

const ucx_backend::impl::remote_region* ucx_backend::impl::find_remote(
    const remote_agent& r, const descriptor& d) noexcept {
    // Regions are sorted by address; a retired region may share its address with the
    // current one that replaced it, so look back over the regions that start at or before.
    auto it = std::upper_bound(
        r.regions.begin(), r.regions.end(), d.address,
        [](std::uint64_t a, const remote_region& x) { return a < x.desc.address; });
    while (it != r.regions.begin()) {
        const remote_region& x = *--it;
        if (x.current && x.rkey != nullptr && d.end() <= x.desc.end() && d.end() >= d.address &&
            x.desc.kind == d.kind) {
            return &x;
        }
        if (x.current && x.desc.end() <= d.address) {
            break;  // regions of one agent do not overlap: nothing earlier contains d
        }
    }
    return nullptr;
}

status ucx_backend::impl::create(transfer_op op,
                                 std::span<const descriptor> local_descs,
                                 std::span<const descriptor> remote_descs,
                                 std::string_view remote_name,
                                 const transfer_attributes& attrs,
                                 std::string_view request_id,
                                 transfer_handle& out,
                                 const transfer_tags& tags) {
    if (op != transfer_op::read && op != transfer_op::write) {
        return fail(status_code::invalid_argument,
                    "agent '{}': transfer operation {} is unknown (expected READ or WRITE)", name,
                    static_cast<int>(op));
    }
    const auto it = remotes.find(remote_name);
    if (it == remotes.end()) {
        return fail(status_code::not_found,
                    "agent '{}': remote agent '{}' is not loaded (load its metadata first)", name,
                    remote_name);
    }
    const auto& remote = it->second;
    if (!remote->usable()) {
        return remote_gone(*remote);
    }
    std::vector<rma_op> ops;
    std::uint64_t bytes = 0;
    if (status st = make_ops(local_descs, remote_descs, *remote, remote_name, ops, bytes);
        !st.ok()) {
        return st;
    }
    std::shared_ptr<const std::vector<std::byte>> wire;
    if (tags.notify) {
        if (status st = encode_transfer_notification(op, bytes, ops.size(), tags, wire); !st.ok()) {
            return st;
        }
    }
    std::uint32_t index = 0;
    if (status st = take_slot(index); !st.ok()) {
        return st;
    }
    for (auto& o : ops) {
        ++o.region->users;
    }
    transfer& t = transfers[index];
    t.st = state::created;
    t.op = op;
    t.remote = remote;
    t.ops = std::move(ops);
    t.info = {};
    t.info.dir = op == transfer_op::write ? direction::tx : direction::rx;
    t.info.bytes = bytes;
    t.info.attrs = attrs;
    t.info.tagged = !request_id.empty();
    t.info.shape = {.descriptors = static_cast<std::uint16_t>(std::min<std::size_t>(
                        t.ops.size(), std::numeric_limits<std::uint16_t>::max())),
                    .lanes = remote->lanes};
    t.request_id.assign(clip_request_id(request_id));
    t.failure = {};
    t.notify = wire ? transfer_outcome::notify : 0;
    t.notification = std::move(wire);
    out.id = (static_cast<std::uint64_t>(t.generation) << 32) | (index + 1u);
    return {};
}

/// The operations of a transfer, one per descriptor pair, each checked against the memory
/// registered on both sides; `bytes` is their total.
status ucx_backend::impl::make_ops(std::span<const descriptor> local_descs,
                                   std::span<const descriptor> remote_descs,
                                   const remote_agent& remote,
                                   std::string_view remote_name,
                                   std::vector<rma_op>& ops,
                                   std::uint64_t& bytes) {
    if (local_descs.empty() || local_descs.size() != remote_descs.size()) {
        return fail(status_code::invalid_argument,
                    "agent '{}': a transfer needs as many remote descriptors as local ones, "
                    "at least one (got {} local, {} remote)",
                    name, local_descs.size(), remote_descs.size());
    }
    ops.reserve(local_descs.size());
    for (std::size_t i = 0; i < local_descs.size(); ++i) {
        const descriptor& l = local_descs[i];
        const descriptor& r = remote_descs[i];
        if (l.length == 0 || l.length != r.length) {
            return fail(status_code::invalid_argument,
                        "agent '{}': descriptor pair {} has lengths {} (local) and {} "
                        "(remote); expected equal lengths of at least 1 byte",
                        name, i, l.length, r.length);
        }
        local_region* lr = find_local(l);
        if (lr == nullptr) {
            return fail(status_code::not_found,
                        "agent '{}': local descriptor {} {} is not within memory this agent "
                        "registered",
                        name, i, describe(l));
        }
        const remote_region* rr = find_remote(remote, r);
        if (rr == nullptr) {
            return fail(status_code::not_found,
                        "agent '{}': remote descriptor {} {} is not within memory agent '{}' "
                        "registered (as of its last loaded metadata)",
                        name, i, describe(r), remote_name);
        }
        ops.push_back(
            {l.pointer(), r.address, static_cast<std::size_t>(l.length), rr->rkey, lr->memh, lr});
        bytes += l.length;
    }
    return {};
}

/// A free slot, or a new one.
status ucx_backend::impl::take_slot(std::uint32_t& index) {
    if (!free_slots.empty()) {
        index = free_slots.back();
        free_slots.pop_back();
        return {};
    }
    if (transfers.size() >= 0xffffffffu) {
        return fail(status_code::busy, "agent '{}': too many live transfers", name);
    }
    index = static_cast<std::uint32_t>(transfers.size());
    transfers.emplace_back();
    return {};
}

status ucx_backend::impl::release(transfer_handle h) {
    transfer* t = find(h);
    if (t == nullptr) {
        return unknown(h);
    }
    if (t->st == state::in_progress) {
        return fail(status_code::busy,
                    "agent '{}': transfer {:#x} is in progress; poll it to completion before "
                    "releasing it",
                    name, h.id);
    }
    for (auto& op : t->ops) {
        --op.region->users;
    }
    const std::uint32_t next_generation = t->generation + 1 == 0 ? 1 : t->generation + 1;
    *t = transfer{};
    t->generation = next_generation;
    free_slots.push_back(static_cast<std::uint32_t>(t - transfers.data()));
    free_orphans();
    return {};
}

/// Requests of transfers that failed before UCX finished with them; freed once complete.
void ucx_backend::impl::free_orphans() noexcept {
    for (std::size_t i = 0; i < orphans.size();) {
        if (::ucp_request_check_status(orphans[i]) != UCS_INPROGRESS) {
            ::ucp_request_free(orphans[i]);
            orphans[i] = orphans.back();
            orphans.pop_back();
        } else {
            ++i;
        }
    }
}

// ---- the per-transfer path ------------------------------------------------------------------

inline ucx_backend::impl::transfer* ucx_backend::impl::find(transfer_handle h) noexcept {
    const std::uint64_t index = h.id & 0xffffffffu;
    if (index == 0 || index > transfers.size()) [[unlikely]] {
        return nullptr;
    }
    transfer& t = transfers[index - 1];
    if (t.generation != (h.id >> 32) || t.st == state::free) [[unlikely]] {
        return nullptr;
    }
    return &t;
}

inline status ucx_backend::impl::unknown(transfer_handle h) const noexcept {
    return fail(status_code::invalid_argument,
                "agent '{}': transfer handle {:#x} is not a live transfer of this agent "
                "(released, or never created here)",
                name, h.id);
}

/// Ends a transfer in failure; the request, if UCX still holds it, is freed when done. The
/// outcome hands the agent the transfer's record, so the failure is recorded once.
inline status ucx_backend::impl::fail_transfer(transfer& t,
                                               status why,
                                               transfer_outcome& outcome) noexcept {
    outcome.state = &t.info;
    outcome.flags |= transfer_outcome::new_error | transfer_outcome::failed;
    if (t.request != nullptr) {
        if (::ucp_request_check_status(t.request) != UCS_INPROGRESS) {
            ::ucp_request_free(t.request);
        } else {
            try {
                orphans.push_back(t.request);
            } catch (...) {
                // Leaked rather than freed while UCX uses it.
            }
        }
        t.request = nullptr;
    }
    t.st = state::failed;
    t.failure = std::move(why);
    return t.failure;
}

inline status ucx_backend::impl::post(transfer_handle h, transfer_outcome& outcome) noexcept {
    transfer* t = find(h);
    if (t == nullptr) [[unlikely]] {
        outcome.flags |= transfer_outcome::new_error;
        return unknown(h);
    }
    if (t->st == state::in_progress) [[unlikely]] {
        outcome.flags |= transfer_outcome::new_error;
        return fail(status_code::busy,
                    "agent '{}': transfer {:#x} is in progress; poll it to completion "
                    "before posting it again",
                    name, h.id);
    }
    t->info.timed = false;  // the agent marks the posts it times, after this call
    // Transfers that complete at once (shared memory) are never polled, yet UCX notices a
    // dead peer only while it progresses: so every few posts progress once.
    if ((++posts & (progress_every_posts - 1)) == 0) [[unlikely]] {
        progress_once();
    }
    remote_agent& r = *t->remote;
    if (!r.usable()) [[unlikely]] {
        return fail_transfer(*t, remote_gone(r), outcome);
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    const bool write = t->op == transfer_op::write;
    for (const rma_op& op : t->ops) {
        param.memh = op.memh;
        void* req = write ? ::ucp_put_nbx(r.ep, op.local, op.length, op.remote, op.rkey, &param)
                          : ::ucp_get_nbx(r.ep, op.local, op.length, op.remote, op.rkey, &param);
        if (UCS_PTR_IS_ERR(req)) [[unlikely]] {
            return fail_transfer(*t, transfer_error(*t, UCS_PTR_STATUS(req)), outcome);
        }
        if (req != nullptr) {
            // Completion is tracked by the flush below, which covers this operation.
            ::ucp_request_free(req);
        }
    }
    ucp_request_param_t flush{};
    void* req = ::ucp_ep_flush_nbx(r.ep, &flush);
    outcome.state = &t->info;
    if (req == nullptr) {
        t->st = state::done;
        count_completion(*t, outcome);
        return {};
    }
    if (UCS_PTR_IS_ERR(req)) [[unlikely]] {
        return fail_transfer(*t, transfer_error(*t, UCS_PTR_STATUS(req)), outcome);
    }
    t->request = req;
    t->st = state::in_progress;
    t->idle_polls = 0;
    t->deadline_us = 0;
    return status::in_progress();
}

/// A completion, counted in the slot's first line, which the caller has just written.
inline void ucx_backend::impl::count_completion(transfer& t, transfer_outcome& outcome) noexcept {
    outcome.flags |= t.notify;
    // A listed transfer is on the agent's list already: no call to put it there again (a
    // timed completion takes the count back to 0, so with every post timed each post did).
    if (t.info.unreported++ == 0 && !t.info.listed) {
        outcome.flags |= transfer_outcome::first_unreported;
    }
}

inline status ucx_backend::impl::transfer_error(transfer& t, ucs_status_t st) noexcept {
    if (t.remote->failed || t.remote->closed) {
        return t.remote->failure;
    }
    return fail(code_of(st), "agent '{}': {} of {} bytes to '{}' failed: {} (UCX)", name,
                to_string(t.op), t.info.bytes, t.remote->name, ::ucs_status_string(st));
}

inline status ucx_backend::impl::poll(transfer_handle h, transfer_outcome& outcome) noexcept {
    transfer* t = find(h);
    if (t == nullptr) [[unlikely]] {
        outcome.flags |= transfer_outcome::new_error;
        return unknown(h);
    }
    switch (t->st) {
        case state::in_progress:
            break;
        case state::done:
            return {};
        case state::failed:
            return t->failure;
        default:
            outcome.flags |= transfer_outcome::new_error;
            return fail(status_code::invalid_argument,
                        "agent '{}': transfer {:#x} has not been posted", name, h.id);
    }
    progress_once();
    const ucs_status_t st = ::ucp_request_check_status(t->request);
    if (st == UCS_INPROGRESS) {
        return still_running(*t, outcome);
    }
    ::ucp_request_free(t->request);
    t->request = nullptr;
    if (st == UCS_OK) [[likely]] {
        t->st = state::done;
        outcome.state = &t->info;
        count_completion(*t, outcome);
        return {};
    }
    return fail_transfer(*t, transfer_error(*t, st), outcome);
}

inline status ucx_backend::impl::still_running(transfer& t, transfer_outcome& outcome) noexcept {
    remote_agent& r = *t.remote;
    if (!r.usable()) [[unlikely]] {
        return fail_transfer(t, remote_gone(r), outcome);
    }
    // The deadline costs a clock read only every 1024 polls of a transfer that is slow.
    if (options.transfer_timeout.count() > 0 && (++t.idle_polls & 1023u) == 0) [[unlikely]] {
        const std::uint64_t now = clock::monotonic_us();
        const auto limit = static_cast<std::uint64_t>(options.transfer_timeout.count()) * 1000;
        if (t.deadline_us == 0) {
            t.deadline_us = now + limit;
        } else if (now > t.deadline_us) {
            r.failed = true;
            r.failure = fail(status_code::timed_out,
                             "agent '{}': a {} of {} bytes to '{}' did not complete within {} "
                             "ms; the connection to '{}' was closed",
                             name, to_string(t.op), t.info.bytes, r.name,
                             options.transfer_timeout.count(), r.name);
            note_disconnect();
            close(r);
            return fail_transfer(t, r.failure, outcome);
        }
    }
    return status::in_progress();
}

/// Here, not in notifications.cpp: it finds the slot with the per-transfer path's find.
void ucx_backend::impl::send_transfer_notification(transfer_handle h) noexcept {
    transfer* t = find(h);
    if (t != nullptr && t->notification) {
        (void)send_wire(*t->remote, t->notification);  // counted and logged there
    }
}

// ---- the public object --------------------------------------------------------------------

status ucx_backend::create_transfer(transfer_op op,
                                    std::span<const descriptor> local,
                                    std::span<const descriptor> remote,
                                    std::string_view remote_name,
                                    const transfer_attributes& attrs,
                                    std::string_view request_id,
                                    transfer_handle& out,
                                    const transfer_tags& tags) {
    return impl_->create(op, local, remote, remote_name, attrs, request_id, out, tags);
}

std::string_view ucx_backend::request_id(transfer_handle h) noexcept {
    impl::transfer* t = impl_->find(h);
    return t == nullptr ? std::string_view{} : std::string_view{t->request_id};
}

status ucx_backend::post(transfer_handle h, transfer_outcome& outcome) noexcept {
    status st = impl_->post(h, outcome);
    if (outcome.flags != 0) [[unlikely]] {
        impl_->notify(outcome, st, h);
    }
    return st;
}

status ucx_backend::poll(transfer_handle h, transfer_outcome& outcome) noexcept {
    status st = impl_->poll(h, outcome);
    if (outcome.flags != 0) [[unlikely]] {
        impl_->notify(outcome, st, h);
    }
    return st;
}

status ucx_backend::release(transfer_handle h) {
    return impl_->release(h);
}

transfer_state* ucx_backend::state(transfer_handle h) noexcept {
    impl::transfer* t = impl_->find(h);
    return t == nullptr ? nullptr : &t->info;
}

unsigned ucx_backend::progress() noexcept {
    return impl_->progress_once();
}

}  // namespace xtel::detail
