#include "http/server.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <system_error>

#include "core/log.hpp"
#include "http/request.hpp"
#include "xtel/error.hpp"

namespace xtel::detail {

namespace {

using steady = std::chrono::steady_clock;

/// Request bytes read and thrown away after an answer that closes the connection: enough for
/// a client's small body in flight, little for one that streams junk.
constexpr std::size_t drain_limit = std::size_t{64} << 10;
/// Connections accepted in one go before the others get their turn.
constexpr int accepts_per_wake = 64;
/// How long accepting stops when the process is out of file descriptors.
constexpr auto accept_pause = std::chrono::milliseconds(100);

/// What epoll's data.ptr holds for the two descriptors that are not connections.
char listen_tag;
char wake_tag;

std::string listen_failure_reason(int err) {
    switch (err) {
        case EADDRINUSE:
            return "the port is already in use";
        case EACCES:
            return "permission denied (a port below 1024 needs privileges)";
        case EADDRNOTAVAIL:
            return "the host is not an address of this machine";
        default:
            return std::system_category().message(err);
    }
}

/// Runs `f`; an exception becomes an error log line.
template <class F>
void logging_failures(std::string_view what, F&& f) noexcept {
    try {
        f();
    } catch (const std::exception& e) {
        detail::log(log_level::error, "prometheus endpoint: {}: {}", what, e.what());
    } catch (...) {
        detail::log(log_level::error, "prometheus endpoint: {}: unknown exception", what);
    }
}

}  // namespace

struct http_server::connection {
    enum class phase { reading, writing, lingering };

    int fd = -1;
    phase state = phase::reading;
    /// The events epoll watches for.
    std::uint32_t events = 0;
    /// Received and not yet answered: part of a request head, or a head and what follows it.
    std::string in;
    /// Bytes that can change the verdict arrived since the last parse (see drive()). Parsing only
    /// then keeps a client that sends one byte at a time from costing a parse per byte.
    bool reparse = false;
    std::string head_out;
    std::shared_ptr<const std::string> body_out;
    std::size_t body_bytes = 0;  // of body_out to send: none for HEAD
    std::size_t sent = 0;
    std::size_t drained = 0;
    bool close_after = false;
    unsigned answered = 0;
    /// When the request being awaited began to be awaited: who has waited longest is evicted.
    steady::time_point waiting_since;
    steady::time_point deadline;
};

http_server::http_server(const host_port& address,
                         std::string path,
                         std::string content_type,
                         body_fn body,
                         http_limits limits)
    : path_(std::move(path)),
      content_type_(std::move(content_type)),
      body_(std::move(body)),
      limits_(limits),
      bound_(address) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(address.port);
    if (const int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
        throw exporter_error(fmt::format(
            "cannot listen on {}: the host does not resolve to an address of this machine ({})",
            address.to_string(), ::gai_strerror(rc)));
    }
    int err = EADDRNOTAVAIL;
    for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        // SO_REUSEADDR: the port of an endpoint that just stopped can be bound again at once,
        // whatever its old connections left in TIME_WAIT. Not SO_REUSEPORT: that would let a
        // second process bind the same port and take half the scrapes; a taken port must fail.
        const int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
            listen_fd_ = fd;
            break;
        }
        err = errno;
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) {
        throw exporter_error(fmt::format("cannot listen on {}: {}", address.to_string(),
                                         listen_failure_reason(err)));
    }
    auto fail = [&](std::string_view what) {
        const int e = errno;
        for (const int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
            if (fd >= 0) {
                ::close(fd);
            }
        }
        throw exporter_error(fmt::format("cannot serve {}: {}: {}", address.to_string(), what,
                                         std::system_category().message(e)));
    };
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
        fail("getsockname");
    }
    if (local.ss_family == AF_INET6) {
        sockaddr_in6 a{};
        std::memcpy(&a, &local, sizeof a);
        bound_.port = ntohs(a.sin6_port);
    } else {
        sockaddr_in a{};
        std::memcpy(&a, &local, sizeof a);
        bound_.port = ntohs(a.sin_port);
    }
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
        fail("epoll_create1");
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
        fail("eventfd");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &listen_tag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
        fail("epoll_ctl");
    }
    ev.data.ptr = &wake_tag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
        fail("epoll_ctl");
    }
    thread_ = std::thread([this] { run(); });
}

http_server::~http_server() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
    for (auto& c : connections_) {
        close_connection(*c);
    }
    ::close(listen_fd_);
    ::close(epoll_fd_);
    ::close(wake_fd_);
}

void http_server::run() noexcept {
    ::pthread_setname_np(::pthread_self(), "xtel-metrics");
    epoll_event events[64];
    bool stopping = false;
    while (!stopping) {
        auto now = steady::now();
        if (!accepting_ && now >= accept_resume_) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.ptr = &listen_tag;
            accepting_ = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev) == 0;
        }
        const int n = ::epoll_wait(epoll_fd_, events, std::size(events), wait_timeout_ms(now));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            const int err = errno;
            detail::log(log_level::error,
                        "prometheus endpoint: epoll_wait failed: {}; /metrics is no longer served",
                        std::system_category().message(err));
            return;
        }
        for (int i = 0; i < n; ++i) {
            void* const tag = events[i].data.ptr;
            if (tag == &wake_tag) {
                stopping = true;
            } else if (tag == &listen_tag) {
                logging_failures("accepting a connection", [&] { accept_ready(); });
            } else {
                // A connection closed earlier in this round keeps its slot, marked fd -1, until
                // the sweep below, so this pointer is still valid.
                auto& c = *static_cast<connection*>(tag);
                if (c.fd >= 0) {
                    logging_failures("serving a connection", [&] {
                        try {
                            drive(c);
                        } catch (...) {
                            close_connection(c);
                            throw;
                        }
                    });
                }
            }
        }
        logging_failures("closing late connections", [&] { expire(steady::now()); });
        std::erase_if(connections_, [](const auto& c) { return c->fd < 0; });
    }
}

int http_server::wait_timeout_ms(steady::time_point now) const {
    auto next = steady::time_point::max();
    for (const auto& c : connections_) {
        if (c->fd >= 0) {
            next = std::min(next, c->deadline);
        }
    }
    if (!accepting_) {
        next = std::min(next, accept_resume_);
    }
    if (next == steady::time_point::max()) {
        return -1;
    }
    if (next <= now) {
        return 0;
    }
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::min<long long>(ms, 60'000));
}

void http_server::accept_ready() {
    for (int i = 0; i < accepts_per_wake; ++i) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            if (err == EINTR || err == ECONNABORTED) {
                continue;
            }
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                // The process (or the system) is out of descriptors or memory. The listening
                // socket stays readable, so rather than spin on it, stop watching it a while.
                epoll_event ev{};
                ev.data.ptr = &listen_tag;
                ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
                accepting_ = false;
                accept_resume_ = steady::now() + accept_pause;
                if (!warned_accept_) {
                    warned_accept_ = true;
                    detail::log(log_level::warning,
                                "prometheus endpoint {}: cannot accept a connection: {}; "
                                "accepting pauses for {} ms each time (logged once)",
                                bound_.to_string(), std::system_category().message(err),
                                accept_pause.count());
                }
            }
            return;  // EAGAIN: nobody else is waiting
        }
        std::unique_ptr<connection> owned;
        try {
            owned = std::make_unique<connection>();
        } catch (...) {
            ::close(fd);
            throw;
        }
        connection& c = *owned;
        c.fd = fd;
        const auto now = steady::now();
        c.waiting_since = now;
        c.deadline = now + limits_.request_timeout;
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = &c;
        if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            ::close(fd);
            continue;
        }
        c.events = EPOLLIN;
        std::size_t open = 0;
        for (const auto& other : connections_) {
            open += other->fd >= 0 ? 1 : 0;
        }
        if (open >= limits_.max_connections) {
            evict_one();
        }
        connections_.push_back(std::move(owned));
        drive(c);  // a client's request often arrives with its connection
    }
}

void http_server::evict_one() {
    // Lingering ones first (their answer is out), then the one that has waited longest for a
    // request; one that is being answered only when every connection is.
    const auto rank = [](const connection& c) {
        return c.state == connection::phase::lingering ? 0
               : c.state == connection::phase::reading ? 1
                                                       : 2;
    };
    connection* victim = nullptr;
    for (const auto& c : connections_) {
        if (c->fd < 0) {
            continue;
        }
        if (victim == nullptr || rank(*c) < rank(*victim) ||
            (rank(*c) == rank(*victim) && c->waiting_since < victim->waiting_since)) {
            victim = c.get();
        }
    }
    if (victim == nullptr) {
        return;
    }
    close_connection(*victim);
    if (!warned_crowd_) {
        warned_crowd_ = true;
        detail::log(log_level::warning,
                    "prometheus endpoint {}: more than {} connections at once; each new one "
                    "closes the one that has waited longest for its request (logged once)",
                    bound_.to_string(), limits_.max_connections);
    }
}

void http_server::expire(steady::time_point now) {
    for (const auto& owned : connections_) {
        connection& c = *owned;
        if (c.fd < 0 || c.deadline > now) {
            continue;
        }
        if (c.state == connection::phase::reading && !c.in.empty()) {
            // Part of a request came and the rest did not: say so, then close.
            respond(c, 408, true, false,
                    fmt::format("the request did not arrive whole within {} ms\n",
                                limits_.request_timeout.count()));
            c.in.clear();
            drive(c);
        } else {
            close_connection(c);  // idle, or not taking its answer
        }
    }
}

void http_server::close_connection(connection& c) noexcept {
    if (c.fd >= 0) {
        ::close(c.fd);  // also leaves the epoll set: nothing else holds the descriptor
        c.fd = -1;
    }
    c.body_out.reset();
}

void http_server::watch(connection& c, std::uint32_t events) noexcept {
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

void http_server::respond(
    connection& c, int status, bool close, bool head_only, std::string_view text) {
    std::shared_ptr<const std::string> body;
    std::string_view type = "text/plain; charset=utf-8";
    if (status == 200) {
        try {
            body = body_();
            type = content_type_;
        } catch (const std::exception& e) {
            status = 500;
            body = std::make_shared<const std::string>(
                fmt::format("rendering failed: {}\n", e.what()));
        } catch (...) {
            status = 500;
            body = std::make_shared<const std::string>("rendering failed\n");
        }
    } else {
        body = std::make_shared<const std::string>(text);
    }
    c.head_out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", status,
                             http::reason_phrase(status), type, body->size());
    if (status == 405) {
        c.head_out += "Allow: GET, HEAD\r\n";
    }
    c.head_out += close ? "Connection: close\r\n\r\n" : "\r\n";
    c.body_bytes = head_only ? 0 : body->size();
    c.body_out = std::move(body);
    c.sent = 0;
    c.close_after = close;
    c.state = connection::phase::writing;
    c.deadline = steady::now() + limits_.write_timeout;
}

void http_server::drive(connection& c) {
    using phase = connection::phase;
    while (c.fd >= 0) {
        if (c.state == phase::reading) {
            if (c.reparse) {
                c.reparse = false;
                const auto r = http::parse_request_head(c.in);
                if (r.status != 0) {
                    const int status = r.status == 200 ? http::route(r.head, path_) : r.status;
                    const bool close = http::closes_after(r, status) ||
                                       c.answered + 1 >= limits_.max_requests_per_connection;
                    std::string text;
                    if (status == 404) {
                        text = fmt::format("{} not found; metrics are at {}\n", r.head.path, path_);
                    } else if (status == 405) {
                        text = fmt::format("method {} is not allowed on {}; use GET\n",
                                           r.head.method, path_);
                    } else if (status == 413) {
                        text = fmt::format("{} takes no request body\n", path_);
                    } else if (status != 200) {
                        text = fmt::format("{}\n", r.reason);
                    }
                    const bool head_only = r.status == 200 && r.head.method == "HEAD";
                    // HTTP/1.0 keeps a connection only when both sides say so.
                    const bool say_keep_alive = !close && r.status == 200 && !r.head.http11;
                    const std::size_t consumed = close ? c.in.size() : r.head.size;
                    respond(c, status, close, head_only, text);
                    if (say_keep_alive) {
                        c.head_out.insert(c.head_out.size() - 2, "Connection: keep-alive\r\n");
                    }
                    c.in.erase(0, consumed);  // r's views pointed into it: used up above
                    c.reparse = !c.in.empty();
                    continue;
                }
            }
            const std::size_t room =
                http::max_head_bytes - std::min(c.in.size(), http::max_head_bytes);
            if (room == 0) {
                // Cannot happen: a head of max_head_bytes parses as complete or wrong.
                close_connection(c);
                return;
            }
            char buf[http::max_head_bytes];
            const auto n = ::recv(c.fd, buf, room, 0);
            if (n > 0) {
                // The verdict can change only with a CR or LF (a line ends, or a CR is followed
                // by something else), or at the size limit.
                const std::string_view chunk(buf, static_cast<std::size_t>(n));
                c.reparse = chunk.find_first_of("\r\n") != std::string_view::npos ||
                            (!c.in.empty() && c.in.back() == '\r') ||
                            c.in.size() + chunk.size() >= http::max_head_bytes;
                c.in.append(chunk);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                watch(c, EPOLLIN);
                return;
            }
            if (n < 0 && errno == EINTR) {
                continue;
            }
            close_connection(c);  // the client left, perhaps mid-request: nobody to answer
            return;
        }

        if (c.state == phase::writing) {
            const std::size_t total = c.head_out.size() + c.body_bytes;
            if (c.sent < total) {
                iovec iov[2];
                int parts = 0;
                if (c.sent < c.head_out.size()) {
                    iov[parts++] = {c.head_out.data() + c.sent, c.head_out.size() - c.sent};
                }
                const std::size_t body_sent =
                    c.sent > c.head_out.size() ? c.sent - c.head_out.size() : 0;
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
                    continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    watch(c, EPOLLOUT);
                    return;
                }
                if (n < 0 && errno == EINTR) {
                    continue;
                }
                close_connection(c);
                return;
            }
            ++c.answered;
            c.body_out.reset();
            c.head_out.clear();
            const auto now = steady::now();
            if (c.close_after) {
                // Half-close, then read what the client still sends for a moment: closing with
                // unread bytes would reset the connection, and a reset can destroy the answer
                // before the client has read it.
                ::shutdown(c.fd, SHUT_WR);
                c.state = phase::lingering;
                c.deadline = now + limits_.linger_timeout;
            } else {
                c.state = phase::reading;
                c.waiting_since = now;
                c.deadline = now + limits_.request_timeout;
            }
            continue;
        }

        // Lingering.
        char buf[16384];
        const auto n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n > 0) {
            c.drained += static_cast<std::size_t>(n);
            if (c.drained > drain_limit) {
                close_connection(c);
                return;
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch(c, EPOLLIN);
            return;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        close_connection(c);  // the client has read the answer and closed
        return;
    }
}

}  // namespace xtel::detail
