// Notifications in NIXL's manner: a message an agent sends another after a transfer's data is in
// place (or on its own), received as a UCX active message and queued until the owner polls.
//
// Ordering: a transfer's notification is sent only once the transfer completed, that is once
// the endpoint flush that ends every post completed (or the post completed at once). A completed
// flush means every RMA operation before it is complete at the target, so the data is in place
// before the notification is even handed to UCX; nothing relies on UCX ordering an active
// message after RMA on other lanes, which it does not promise. Notifications from one sender
// arrive in the order it sent them when they share one lane; UCX promises no more, so
// get_notifications says "in the order they arrived".

#include <algorithm>

#include "agent/notification_codec.hpp"
#include "agent/ucx/backend_impl.hpp"
#include "core/log.hpp"

namespace xtel::detail {

using namespace ucx;

status ucx_backend::impl::encode_transfer_notification(
    transfer_op op,
    std::uint64_t bytes,
    std::size_t descriptors,
    const transfer_tags& tags,
    std::shared_ptr<const std::vector<std::byte>>& out) {
    if (tags.notification.size() > max_notification) {
        return fail(status_code::invalid_argument,
                    "agent '{}': a notification of {} bytes is too long (at most {} bytes)", name,
                    tags.notification.size(), max_notification);
    }
    notification n;
    n.remote_agent = name;  // the sender, as the receiver will see it
    n.message.assign(tags.notification);
    n.transfer = true;
    n.op = op;
    n.descriptors = static_cast<std::uint32_t>(std::min<std::size_t>(descriptors, 0xffffffffu));
    n.bytes = bytes;
    set_trace(n, tags.request_id);
    auto wire = std::make_shared<std::vector<std::byte>>();
    encode_notification(n, *wire);
    out = std::move(wire);
    return {};
}

status ucx_backend::impl::send_notification(std::string_view remote_name,
                                            std::string_view message) {
    if (message.size() > max_notification) {
        return fail(status_code::invalid_argument,
                    "agent '{}': a notification of {} bytes is too long (at most {} bytes)", name,
                    message.size(), max_notification);
    }
    notification n;
    n.remote_agent = name;
    n.message.assign(message);
    auto wire = std::make_shared<std::vector<std::byte>>();
    encode_notification(n, *wire);
    return send_raw(remote_name, std::move(wire));
}

status ucx_backend::impl::send_raw(std::string_view remote_name,
                                   std::shared_ptr<const std::vector<std::byte>> wire) {
    const auto it = remotes.find(remote_name);
    if (it == remotes.end()) {
        return fail(status_code::not_found,
                    "agent '{}': remote agent '{}' is not loaded (load its metadata first)", name,
                    remote_name);
    }
    remote_agent& r = *it->second;
    if (!r.usable()) {
        return remote_gone(r);
    }
    return send_wire(r, std::move(wire));
}

status ucx_backend::impl::send_wire(remote_agent& r,
                                    std::shared_ptr<const std::vector<std::byte>> wire) noexcept {
    sweep_sends();
    status why;
    try {
        sends.reserve(sends.size() + 1);  // before UCX takes the bytes: keeping them cannot fail
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        // Eager only: the receiver then gets the whole message in its callback (a notification
        // is at most max_notification bytes plus its header, well within eager sizes).
        param.flags = UCP_AM_SEND_FLAG_EAGER;
        void* req = ::ucp_am_send_nbx(r.ep, notification_am_id, nullptr, 0, wire->data(),
                                      wire->size(), &param);
        if (!UCS_PTR_IS_ERR(req)) {
            if (req != nullptr) {
                sends.push_back({req, std::move(wire)});
            }
            ++notified.sent;
            return {};
        }
        why = fail(code_of(UCS_PTR_STATUS(req)),
                   "agent '{}': a notification to '{}' was not sent: {} (UCX)", name, r.name,
                   ::ucs_status_string(UCS_PTR_STATUS(req)));
    } catch (...) {
        why = status(status_code::backend_error, "out of memory");
    }
    ++notified.unsent;
    try {
        if (std::find(unsent_logged.begin(), unsent_logged.end(), r.name) == unsent_logged.end()) {
            unsent_logged.push_back(r.name);
            log(log_level::warning, "{} (logged once per peer; notifications() counts them)",
                why.message());
        }
    } catch (...) {
    }
    return why;
}

/// Frees the sends UCX finished; called before each new one, so the list stays as long as the
/// sends in flight.
void ucx_backend::impl::sweep_sends() noexcept {
    for (std::size_t i = 0; i < sends.size();) {
        if (::ucp_request_check_status(sends[i].request) != UCS_INPROGRESS) {
            ::ucp_request_free(sends[i].request);
            sends[i] = std::move(sends.back());
            sends.pop_back();
        } else {
            ++i;
        }
    }
}

ucs_status_t ucx_backend::impl::on_notification(void* arg,
                                                const void* /*header*/,
                                                std::size_t /*header_length*/,
                                                void* data,
                                                std::size_t length,
                                                const ucp_am_recv_param_t* param) {
    const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    static_cast<impl*>(arg)->receive(
        std::span<const std::byte>(static_cast<const std::byte*>(data), rendezvous ? 0 : length),
        rendezvous);
    return UCS_OK;  // the bytes were copied (or dropped): UCX may release them
}

void ucx_backend::impl::receive(std::span<const std::byte> wire, bool rendezvous) noexcept {
    try {
        notification n;
        // A rendezvous message did not come from an agent of this format, which sends eager
        // only; its bytes would need a receive of their own, so it is refused unread.
        const std::string_view why =
            rendezvous ? std::string_view{"sent by rendezvous (notifications are eager)"}
                       : decode_notification(wire, n);
        if (!why.empty()) {
            ++notified.malformed;
            if (!malformed_logged) {
                malformed_logged = true;
                log(log_level::warning,
                    "agent '{}': dropped a malformed notification of {} bytes: {} (logged once; "
                    "notifications().malformed counts them)",
                    name, wire.size(), why);
            }
            return;
        }
        // The transfer landed whether or not its notification finds room in the inbox: the
        // agent records it first.
        if (n.transfer && sink.notified != nullptr) {
            sink.notified(sink.context, n);
        }
        if (inbox.size() >= max_queued_notifications) {
            ++notified.overflowed;
            if (!overflow_logged) {
                overflow_logged = true;
                log(log_level::warning,
                    "agent '{}': dropped a notification from '{}': {} are queued unread (call "
                    "get_notifications); logged once, notifications().overflowed counts them",
                    name, n.remote_agent, inbox.size());
            }
            return;
        }
        inbox.push_back(std::move(n));
        ++notified.received;
    } catch (...) {
        ++notified.overflowed;  // no memory for it: dropped as an overflow
    }
}

status ucx_backend::impl::get_notifications(std::vector<notification>& out) {
    progress_once();
    if (out.empty()) {
        out.swap(inbox);
    } else {
        out.insert(out.end(), std::make_move_iterator(inbox.begin()),
                   std::make_move_iterator(inbox.end()));
    }
    inbox.clear();
    return {};
}

// ---- the public object --------------------------------------------------------------------

status ucx_backend::send_notification(std::string_view remote_name, std::string_view message) {
    return impl_->send_notification(remote_name, message);
}

status ucx_backend::get_notifications(std::vector<notification>& out) {
    return impl_->get_notifications(out);
}

notification_counts ucx_backend::notifications() const noexcept {
    return impl_->notified;
}

status ucx_backend::send_raw_notification(std::string_view remote_name,
                                          std::span<const std::byte> wire) {
    return impl_->send_raw(
        remote_name, std::make_shared<const std::vector<std::byte>>(wire.begin(), wire.end()));
}

}  // namespace xtel::detail
