// A connection's I/O: reading a request head, answering it, writing the answer, lingering after
// an answer that closes the connection; and closing it. With the answers, the bodies that only
// connections hold (limits::max_held_bytes).

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <memory>
#include <vector>

#include "core/log.hpp"
#include "http/connection.hpp"
#include "xtel/http/request.hpp"

namespace xtel::http {

namespace {

using steady = std::chrono::steady_clock;

/// Request bytes read and thrown away after an answer that closes the connection: enough for
/// a client's small body in flight, little for one that streams junk.
constexpr std::size_t drain_limit = std::size_t{64} << 10;

}  // namespace

/// Runs the connection until it waits for the socket (or is closed): each step says whether
/// there is more to do now.
void server::drive(connection& c) {
    using phase = connection::phase;
    bool more = true;
    while (more && c.fd >= 0) {
        switch (c.state) {
            case phase::reading:
                more = read_request(c);
                break;
            case phase::writing:
                more = write_answer(c);
                break;
            case phase::lingering:
                more = linger(c);
                break;
        }
    }
}

// ---- reading ------------------------------------------------------------------------------

bool server::read_request(connection& c) {
    if (c.reparse) {
        c.reparse = false;
        const auto r = parse_request_head(c.in);
        if (r.status != 0) {
            answer(c, r);
            return true;
        }
    }
    return receive_head(c);
}

bool server::receive_head(connection& c) {
    const std::size_t room = max_head_bytes - std::min(c.in.size(), max_head_bytes);
    if (room == 0) {
        // Cannot happen: a head of max_head_bytes parses as complete or wrong.
        close_connection(c);
        return false;
    }
    char buf[max_head_bytes];
    const auto n = ::recv(c.fd, buf, room, 0);
    if (n > 0) {
        // The verdict can change only with a CR or LF (a line ends, or a CR is followed
        // by something else), or at the size limit.
        const std::string_view chunk(buf, static_cast<std::size_t>(n));
        c.reparse = chunk.find_first_of("\r\n") != std::string_view::npos ||
                    (!c.in.empty() && c.in.back() == '\r') ||
                    c.in.size() + chunk.size() >= max_head_bytes;
        c.in.append(chunk);
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c, EPOLLIN);
        return false;
    }
    if (n < 0 && errno == EINTR) {
        return true;
    }
    close_connection(c);  // the client left, perhaps mid-request: nobody to answer
    return false;
}

// ---- answering ----------------------------------------------------------------------------

/// The body of an answer other than 200, one line.
std::string server::error_text(const parse_result& r, int status) const {
    if (status == 404) {
        return fmt::format("{} not found; metrics are at {}\n", r.head.path, path_);
    }
    if (status == 405) {
        return fmt::format("method {} is not allowed on {}; use GET\n", r.head.method, path_);
    }
    if (status == 413) {
        return fmt::format("{} takes no request body\n", path_);
    }
    if (status != 200) {
        return fmt::format("{}\n", r.reason);
    }
    return {};
}

void server::answer(connection& c, const parse_result& r) {
    const int status = r.status == 200 ? route(r.head, path_) : r.status;
    const bool close =
        closes_after(r, status) || c.answered + 1 >= limits_.max_requests_per_connection;
    const std::string text = error_text(r, status);
    const bool head_only = r.status == 200 && r.head.method == "HEAD";
    // HTTP/1.0 keeps a connection only when both sides say so.
    const bool say_keep_alive = !close && r.status == 200 && !r.head.http11;
    const std::size_t consumed = close ? c.in.size() : r.head.size;
    respond(c, status, close, head_only, text, r.status == 200 ? &r.head : nullptr);
    if (say_keep_alive) {
        c.head_out.insert(c.head_out.size() - 2, "Connection: keep-alive\r\n");
    }
    c.in.erase(0, consumed);  // r's views pointed into it: used up above
    c.reparse = !c.in.empty();
}

void server::respond(connection& c,
                     int status,
                     bool close,
                     bool head_only,
                     std::string_view text,
                     const request_head* request) {
    entity e{nullptr, "text/plain; charset=utf-8", false};
    if (status == 200 && request != nullptr) {
        try {
            e = body_(*request);
        } catch (const std::exception& ex) {
            status = 500;
            e.body = std::make_shared<const std::string>(
                fmt::format("rendering failed: {}\n", ex.what()));
        } catch (...) {
            status = 500;
            e.body = std::make_shared<const std::string>("rendering failed\n");
        }
    } else {
        e.body = std::make_shared<const std::string>(text);
    }
    c.head_out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", status,
                             reason_phrase(status), e.content_type, e.body->size());
    if (status == 200) {
        if (e.gzip) {
            c.head_out += "Content-Encoding: gzip\r\n";
        }
        if (!vary_.empty()) {
            c.head_out += fmt::format("Vary: {}\r\n", vary_);
        }
    }
    if (status == 405) {
        c.head_out += "Allow: GET, HEAD\r\n";
    }
    c.head_out += close ? "Connection: close\r\n\r\n" : "\r\n";
    c.body_bytes = head_only ? 0 : e.body->size();
    c.body_out = head_only ? nullptr : e.body;
    c.shared_body = status == 200 && !head_only;
    c.sent = 0;
    c.close_after = close;
    c.state = connection::phase::writing;
    const auto now = steady::now();
    c.last_progress = now;
    c.deadline = now + limits_.write_timeout;
    if (status == 200) {
        hold_body(c, e);
    }
}

void server::hold_body(connection& c, const entity& e) {
    auto latest = std::find_if(latest_.begin(), latest_.end(), [&](const latest_body& l) {
        return l.content_type == e.content_type && l.gzip == e.gzip;
    });
    if (latest == latest_.end()) {
        latest = latest_.insert(latest_.end(), latest_body{e.content_type, e.gzip, {}});
    }
    const bool newer = latest->body.lock() != e.body;
    latest->body = e.body;
    if (newer && c.shared_body) {
        limit_held_bytes();  // only a newer body can leave an older one held by connections alone
    }
}

void server::limit_held_bytes() {
    // Connections are few (max_connections): a scan per newer body costs nothing next to the
    // rendering that made it.
    const auto current = [this](const std::shared_ptr<const std::string>& body) {
        return std::any_of(latest_.begin(), latest_.end(),
                           [&](const latest_body& l) { return l.body.lock() == body; });
    };
    while (true) {
        std::vector<const std::string*> held;
        std::size_t bytes = 0;
        connection* victim = nullptr;
        for (const auto& owned : connections_) {
            connection& c = *owned;
            if (c.fd < 0 || c.state != connection::phase::writing || !c.shared_body ||
                current(c.body_out)) {
                continue;
            }
            if (std::find(held.begin(), held.end(), c.body_out.get()) == held.end()) {
                held.push_back(c.body_out.get());
                bytes += c.body_out->size();
            }
            if (victim == nullptr || c.last_progress < victim->last_progress) {
                victim = &c;
            }
        }
        if (bytes <= limits_.max_held_bytes || held.size() <= 1) {
            return;
        }
        close_connection(*victim);
        closed_held_bytes_.fetch_add(1, std::memory_order_relaxed);
        if (!warned_held_) {
            warned_held_ = true;
            detail::log(log_level::warning,
                        "prometheus endpoint {}: clients that do not read their answers hold "
                        "{} bytes of bodies no newer answer shares, more than the limit of {}; "
                        "each time, the connection that has taken nothing for longest is closed "
                        "(logged once)",
                        bound_.to_string(), bytes, limits_.max_held_bytes);
        }
    }
}

// ---- writing ------------------------------------------------------------------------------

bool server::write_answer(connection& c) {
    if (c.sent < c.head_out.size() + c.body_bytes) {
        return send_some(c);
    }
    finish_answer(c);
    return true;
}

bool server::send_some(connection& c) {
    iovec iov[2];
    int parts = 0;
    if (c.sent < c.head_out.size()) {
        iov[parts++] = {c.head_out.data() + c.sent, c.head_out.size() - c.sent};
    }
    const std::size_t body_sent = c.sent > c.head_out.size() ? c.sent - c.head_out.size() : 0;
    if (body_sent < c.body_bytes) {
        iov[parts++] = {const_cast<char*>(c.body_out->data()) + body_sent,
                        c.body_bytes - body_sent};
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<std::size_t>(parts);
    const auto n = ::sendmsg(c.fd, &m, MSG_NOSIGNAL);
    if (n > 0) {
        c.sent += static_cast<std::size_t>(n);
        c.last_progress = steady::now();
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c, EPOLLOUT);
        return false;
    }
    if (n < 0 && errno == EINTR) {
        return true;
    }
    close_connection(c);
    return false;
}

/// The whole answer is out: await the next request, or linger before closing.
void server::finish_answer(connection& c) {
    ++c.answered;
    c.body_out.reset();
    c.shared_body = false;
    c.head_out.clear();
    const auto now = steady::now();
    if (c.close_after) {
        // Half-close, then read what the client still sends for a moment: closing with
        // unread bytes would reset the connection, and a reset can destroy the answer
        // before the client has read it.
        ::shutdown(c.fd, SHUT_WR);
        c.state = connection::phase::lingering;
        c.deadline = now + limits_.linger_timeout;
    } else {
        c.state = connection::phase::reading;
        c.waiting_since = now;
        c.deadline = now + limits_.request_timeout;
    }
}

// ---- lingering and closing ----------------------------------------------------------------

bool server::linger(connection& c) {
    char buf[16384];
    const auto n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
        c.drained += static_cast<std::size_t>(n);
        if (c.drained > drain_limit) {
            close_connection(c);
            return false;
        }
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c, EPOLLIN);
        return false;
    }
    if (n < 0 && errno == EINTR) {
        return true;
    }
    close_connection(c);  // the client has read the answer and closed
    return false;
}

void server::close_connection(connection& c) noexcept {
    if (c.fd >= 0) {
        // Out of the epoll set first: close() alone leaves it only when no other descriptor
        // refers to the socket, and a process spawned at that moment (posix_spawn, fork) holds
        // copies of every descriptor until it execs or exits. Left in the set, a socket at its
        // end stays ready, and epoll would hand out this connection after the sweep freed it.
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
        ::close(c.fd);
        c.fd = -1;
    }
    c.body_out.reset();
    c.shared_body = false;
}

void server::watch(connection& c, std::uint32_t events) noexcept {
    if (c.events == events) {
        return;
    }
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = &c;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) {
        c.events = events;
    } else {
        close_connection(c);
    }
}

}  // namespace xtel::http
