// The server: listening, the epoll loop, accepting, evicting and deadlines. What a connection
// does with its socket is in connection.cpp.

#include "xtel/http/server.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <system_error>

#include "core/log.hpp"
#include "http/connection.hpp"
#include "xtel/core/error.hpp"
#include "xtel/http/request.hpp"

namespace xtel::http {

namespace {

using steady = std::chrono::steady_clock;

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

/// A non-blocking socket listening on `address`; throws exporter_error naming the address and
/// the reason when there is none.
int open_listener(const host_port& address) {
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
    int listen_fd = -1;
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
            listen_fd = fd;
            break;
        }
        err = errno;
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (listen_fd < 0) {
        throw exporter_error(fmt::format("cannot listen on {}: {}", address.to_string(),
                                         listen_failure_reason(err)));
    }
    return listen_fd;
}

}  // namespace

server::server(const host_port& address,
               std::string path,
               std::string vary,
               body_fn body,
               limits options,
               start when)
    : path_(std::move(path)),
      vary_(std::move(vary)),
      body_(std::move(body)),
      limits_(options),
      bound_(address) {
    listen_fd_ = open_listener(address);
    read_bound_port(address);
    open_event_loop(address);
    if (when == start::listening) {
        serve();
    }
}

void server::serve() {
    if (!thread_.joinable()) {
        thread_ = std::thread([this] { run(); });
    }
}

void server::give_up(const host_port& address, std::string_view what) {
    const int e = errno;
    for (const int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    throw exporter_error(fmt::format("cannot serve {}: {}: {}", address.to_string(), what,
                                     std::system_category().message(e)));
}

/// The port the system chose when 0 was asked.
void server::read_bound_port(const host_port& address) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
        give_up(address, "getsockname");
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
}

/// The epoll set, watching the listening socket and the eventfd that stops the loop.
void server::open_event_loop(const host_port& address) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
        give_up(address, "epoll_create1");
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
        give_up(address, "eventfd");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &listen_tag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
        give_up(address, "epoll_ctl");
    }
    ev.data.ptr = &wake_tag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
        give_up(address, "epoll_ctl");
    }
}

server::~server() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
    if (thread_.joinable()) {
        thread_.join();
    }
    for (auto& c : connections_) {
        close_connection(*c);
    }
    ::close(listen_fd_);
    ::close(epoll_fd_);
    ::close(wake_fd_);
}

void server::run() noexcept {
    ::pthread_setname_np(::pthread_self(), "xtel-metrics");
    epoll_event events[64];
    bool stopping = false;
    while (!stopping) {
        auto now = steady::now();
        if (!accepting_ && (now >= accept_resume_ ||
                            (crowd_paused_ && open_connections() < limits_.max_connections))) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.ptr = &listen_tag;
            accepting_ = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev) == 0;
            crowd_paused_ = crowd_paused_ && !accepting_;
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

int server::wait_timeout_ms(steady::time_point now) const {
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

server_stats server::stats() const noexcept {
    return {closed_crowded_.load(std::memory_order_relaxed),
            closed_held_bytes_.load(std::memory_order_relaxed)};
}

std::size_t server::open_connections() const noexcept {
    return static_cast<std::size_t>(std::count_if(connections_.begin(), connections_.end(),
                                                  [](const auto& c) { return c->fd >= 0; }));
}

void server::accept_ready() {
    for (int i = 0; i < accepts_per_wake; ++i) {
        // A connection is closed to make room only for a newcomer that stays (one that came,
        // asked and left costs nobody a place): here, for the one accepted last time round.
        if (open_connections() > limits_.max_connections && !make_room()) {
            pause_for_crowd(steady::now());
            return;
        }
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            if (err == EINTR || err == ECONNABORTED) {
                continue;
            }
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                pause_accepting(err);
            }
            return;  // EAGAIN: nobody else is waiting
        }
        adopt(fd);
    }
}

void server::pause_for_crowd(steady::time_point now) {
    // Every connection waiting for its request is within its grace, and the ones being
    // answered are kept while any waits: the newcomers wait in the kernel's accept queue, where
    // their requests arrive and are read the moment they are accepted.
    auto resume = now + limits_.request_grace;
    for (const auto& c : connections_) {
        if (c->fd >= 0 && c->state == connection::phase::reading) {
            resume = std::min(resume, c->waiting_since + limits_.request_grace);
        }
    }
    epoll_event ev{};
    ev.data.ptr = &listen_tag;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    accepting_ = false;
    crowd_paused_ = true;
    accept_resume_ = std::max(resume, now + std::chrono::milliseconds(1));
}

void server::pause_accepting(int err) {
    // The process (or the system) is out of descriptors or memory. The listening socket stays
    // readable, so rather than spin on it, stop watching it a while.
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
                    bound_.to_string(), std::system_category().message(err), accept_pause.count());
    }
}

void server::adopt(int fd) {
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
        return;
    }
    c.events = EPOLLIN;
    connections_.push_back(std::move(owned));
    drive(c);  // a client's request often arrives with its connection
    if (c.fd >= 0 && open_connections() > limits_.max_connections) {
        make_room();  // when it cannot yet, accept_ready() stops accepting for a while
    }
}

server::connection* server::eviction_candidate(steady::time_point now) const {
    // Lingering ones first (their answer is out), then the one that has waited longest for a
    // request, once out of its grace; one that is being answered only when every connection
    // is, the one that has taken nothing for longest.
    connection* lingering = nullptr;
    connection* waiting = nullptr;
    connection* writing = nullptr;
    bool any_waiting = false;
    for (const auto& owned : connections_) {
        connection* c = owned.get();
        if (c->fd < 0) {
            continue;
        }
        switch (c->state) {
            case connection::phase::lingering:
                if (lingering == nullptr || c->deadline < lingering->deadline) {
                    lingering = c;
                }
                break;
            case connection::phase::reading:
                any_waiting = true;
                if (c->waiting_since + limits_.request_grace <= now &&
                    (waiting == nullptr || c->waiting_since < waiting->waiting_since)) {
                    waiting = c;
                }
                break;
            case connection::phase::writing:
                if (writing == nullptr || c->last_progress < writing->last_progress) {
                    writing = c;
                }
                break;
        }
    }
    if (lingering != nullptr) {
        return lingering;
    }
    if (waiting != nullptr || any_waiting) {
        return waiting;
    }
    return writing;
}

bool server::make_room() {
    // Each try either closes a connection or sees one answered (it is then no longer waiting,
    // or waits anew), so there are at most as many tries as connections.
    for (std::size_t tries = 0; tries <= connections_.size(); ++tries) {
        connection* victim = eviction_candidate(steady::now());
        if (victim == nullptr) {
            return false;
        }
        if (victim->state != connection::phase::writing) {
            // What our state shows is as old as the last round of events: a request may have
            // arrived since, which closing the connection would lose (and reset the
            // connection, for the client an empty reply). Read it first; a request that
            // arrived is answered, and another connection considered.
            const unsigned answered = victim->answered;
            const auto state = victim->state;
            try {
                drive(*victim);
            } catch (...) {
                close_connection(*victim);
                throw;
            }
            if (victim->fd < 0) {
                return true;  // the client had gone
            }
            if (victim->answered != answered || victim->state != state) {
                continue;
            }
        }
        close_connection(*victim);
        closed_crowded_.fetch_add(1, std::memory_order_relaxed);
        if (!warned_crowd_) {
            warned_crowd_ = true;
            detail::log(log_level::warning,
                        "prometheus endpoint {}: more than {} connections at once; each new one "
                        "closes the one that has waited longest for its request, once that has "
                        "waited {} ms (logged once)",
                        bound_.to_string(), limits_.max_connections, limits_.request_grace.count());
        }
        return true;
    }
    return false;
}

void server::expire(steady::time_point now) {
    for (const auto& owned : connections_) {
        connection& c = *owned;
        if (c.fd < 0 || c.deadline > now) {
            continue;
        }
        if (c.state == connection::phase::reading && !c.in.empty()) {
            // Part of a request came and the rest did not: say so, then close.
            respond(c, 408, true, false,
                    fmt::format("the request did not arrive whole within {} ms\n",
                                limits_.request_timeout.count()),
                    nullptr);
            c.in.clear();
            drive(c);
        } else {
            close_connection(c);  // idle, or not taking its answer
        }
    }
}

}  // namespace xtel::http
