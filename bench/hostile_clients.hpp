#pragma once
// Hostile clients of a Prometheus endpoint on 127.0.0.1, for the benchmark that measures what
// an attack on the endpoint costs the transfers beside it
// (BM_ucx_write/.../prometheus_under_attack), for the endpoint's stress test
// (tests/unit/prometheus_stress_test.cpp) and for xtel-exporter's
// (tests/integration/xtel_exporter_stress_test.cpp).
//
// One thread (on whichever core the scheduler gives it) keeps a crowd of connections open, by
// default 128, twice the endpoint's limit of 64, so that it keeps closing some to admit others;
// each is reopened `reconnect` after the endpoint closes it. Each is one of:
//   - slow: half a request head, then one more byte every `trickle`, never finishing;
//   - idle: connected, saying nothing;
//   - oversized: a header line of `oversized_bytes`, sent as fast as the endpoint takes it (it
//     answers 431 after 8 KiB);
//   - body: GET announcing a gigabyte, then 64 KiB of it (413);
//   - brief: a whole request, then closed at once without reading the answer;
//   - unread: `pipelined` requests sent at once, none of the answers read, until the endpoint
//     closes it.
// On top of the crowd it may open `brief_per_second` brief connections a second. Every
// `scrape_every` (0: never) the same thread also scrapes /metrics as Prometheus would, with its
// own connection and a 2 s deadline, and counts whether it got 200.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace xtel_bench {

class hostile_clients {
  public:
    enum class kind { slow, idle, oversized, body, brief, unread };

    /// `count` connections of one kind, kept open.
    struct group {
        kind k = kind::idle;
        int count = 0;
    };

    struct options {
        std::uint16_t port = 0;
        /// The connections kept open; the groups' connections are opened interleaved.
        std::vector<group> crowd{
            {kind::slow, 32}, {kind::idle, 32}, {kind::oversized, 32}, {kind::body, 32}};
        std::chrono::milliseconds reconnect{100};
        std::chrono::milliseconds trickle{200};
        std::chrono::milliseconds scrape_every{100};
        /// The length of an oversized client's header line.
        std::size_t oversized_bytes = 16384;
        /// Requests an unread client sends.
        int pipelined = 64;
        /// Brief connections opened a second on top of the crowd; 0: none.
        int brief_per_second = 0;
    };

    /// Every hostile row of docs/reliability.md at once, as the stress tests attack: slowloris
    /// (the endpoint's limit of 64 and 50 more, a byte every 30 ms), 500 idle, 16 with a 1 MiB
    /// header, 64 pipelining 20 requests they never read, 8 announcing a body, each reopened
    /// 5 ms after it is closed, and 3000 brief connections a second. No scrapes of its own.
    static options all_rows(std::uint16_t port) {
        options o;
        o.port = port;
        o.crowd = {{kind::slow, 114},
                   {kind::idle, 500},
                   {kind::oversized, 16},
                   {kind::unread, 64},
                   {kind::body, 8}};
        o.reconnect = std::chrono::milliseconds(5);
        o.trickle = std::chrono::milliseconds(30);
        o.scrape_every = std::chrono::milliseconds(0);
        o.oversized_bytes = std::size_t{1} << 20;
        o.pipelined = 20;
        o.brief_per_second = 3000;
        return o;
    }

    explicit hostile_clients(options o)
        : opts_(std::move(o)),
          oversized_(make_oversized(opts_.oversized_bytes)),
          pipelined_(make_pipelined(opts_.pipelined)),
          thread_([this] { run(); }) {}
    ~hostile_clients() { stop(); }
    hostile_clients(const hostile_clients&) = delete;
    hostile_clients& operator=(const hostile_clients&) = delete;

    std::uint64_t scrapes_ok() const { return scrapes_ok_.load(); }
    std::uint64_t scrapes_failed() const { return scrapes_failed_.load(); }
    /// Hostile connections opened so far, brief_per_second's among them.
    std::uint64_t opened() const { return opened_.load(); }
    /// Connections opened so far by brief_per_second.
    std::uint64_t brief_opened() const { return brief_opened_.load(); }
    /// Connections that could not be opened within 50 ms (the endpoint's accept queue full).
    std::uint64_t connect_failures() const { return connect_failures_.load(); }
    /// CPU seconds the attacking thread used, and how long it ran; read after stop().
    double cpu_seconds() const { return cpu_seconds_; }
    double seconds_running() const { return seconds_running_; }

    /// Pauses (false) or resumes (true) the hostile connections; scrapes go on either way.
    /// Paused, every hostile connection is closed within the thread's next round (10 ms).
    void set_active(bool on) { active_.store(on, std::memory_order_relaxed); }

    /// Stops the attack and waits for its thread.
    void stop() {
        if (thread_.joinable()) {
            stop_ = true;
            thread_.join();
        }
    }

  private:
    using clock = std::chrono::steady_clock;

    struct client {
        kind k = kind::idle;
        int fd = -1;
        clock::time_point next{};  // reopen, or trickle the next byte
        std::size_t sent = 0;      // of an oversized client's request
    };

    static std::string make_oversized(std::size_t bytes) {
        return "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(bytes, 'b');
    }

    static std::string make_pipelined(int requests) {
        std::string r;
        for (int i = 0; i < requests; ++i) {
            r += "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        }
        return r;
    }

    /// A connected socket, or -1. A connect that the endpoint's full accept queue holds up
    /// gives up after `timeout` rather than stall the attack.
    int connect_to(std::chrono::milliseconds timeout) const {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -1;
        }
        const timeval t{0, static_cast<suseconds_t>(timeout.count() * 1000)};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(opts_.port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd);
            return -1;
        }
        return fd;
    }

    int connect_hostile() {
        const int fd = connect_to(std::chrono::milliseconds(50));
        if (fd < 0) {
            ++connect_failures_;
        } else {
            ++opened_;
            ::fcntl(fd, F_SETFL, O_NONBLOCK);
        }
        return fd;
    }

    void open_brief() {
        client c;
        c.fd = connect_hostile();
        if (c.fd >= 0) {
            ++brief_opened_;
            send(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            ::close(c.fd);
        }
    }

    void open(client& c, int epoll_fd, clock::time_point now) {
        c.fd = connect_hostile();
        if (c.fd < 0) {
            c.next = now + opts_.reconnect;
            return;
        }
        if (c.k == kind::brief) {
            send(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            close(c, now);
            return;
        }
        epoll_event ev{};
        // An unread client watches only for the endpoint's close, never reading the answers.
        ev.events = c.k == kind::unread ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = &c;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c.fd, &ev);
        static const std::string body =
            "GET /metrics HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n" + std::string(65536, 'x');
        switch (c.k) {
            case kind::slow:
                send(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ");
                c.next = now + opts_.trickle;
                break;
            case kind::idle:
                break;
            case kind::oversized:
                c.sent = 0;
                send_oversized(c, now);
                break;
            case kind::body:
                send(c, body);
                break;
            case kind::unread:
                send(c, pipelined_);
                break;
            case kind::brief:
                break;
        }
    }

    static void send(const client& c, const std::string& bytes) {
        [[maybe_unused]] const auto n =
            ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }

    /// Sends what the socket takes of the rest of the oversized head; closes the client once
    /// the endpoint has closed the connection.
    void send_oversized(client& c, clock::time_point now) {
        while (c.sent < oversized_.size()) {
            const auto n = ::send(c.fd, oversized_.data() + c.sent, oversized_.size() - c.sent,
                                  MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                c.sent += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                close(c, now);
            }
            return;
        }
    }

    void close(client& c, clock::time_point now) {
        ::close(c.fd);
        c.fd = -1;
        c.next = now + opts_.reconnect;
    }

    bool scrape() const {
        const int fd = connect_to(std::chrono::milliseconds(2000));
        if (fd < 0) {
            return false;
        }
        const timeval timeout{2, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        const std::string request =
            "GET /metrics HTTP/1.1\r\nHost: prometheus\r\nConnection: close\r\n\r\n";
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        std::string answer;
        char buf[16384];
        for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
            answer.append(buf, static_cast<std::size_t>(n));
        }
        ::close(fd);
        // A family the default (xtel) set serves once the agent has written.
        return answer.rfind("HTTP/1.1 200 OK\r\n", 0) == 0 &&
               answer.find("xtel_transfer_bytes_total") != std::string::npos;
    }

    /// The crowd, its groups interleaved.
    std::vector<client> make_crowd() const {
        std::vector<client> out;
        std::vector<int> left;
        for (const group& g : opts_.crowd) {
            left.push_back(std::max(g.count, 0));
        }
        for (bool any = true; any;) {
            any = false;
            for (std::size_t i = 0; i < left.size(); ++i) {
                if (left[i] > 0) {
                    --left[i];
                    out.push_back(client{opts_.crowd[i].k});
                    any = true;
                }
            }
        }
        return out;
    }

    void run() {
        const auto started = clock::now();
        const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
        std::vector<client> clients = make_crowd();
        auto next_scrape = clock::now();
        std::uint64_t brief_due_base = 0;  // brief connections owed before the attack resumed
        auto brief_since = clock::now();
        std::uint64_t brief_made = 0;
        epoll_event events[64];
        char drain[65536];
        while (!stop_) {
            auto now = clock::now();
            const bool hostile = active_.load(std::memory_order_relaxed);
            for (auto& c : clients) {
                if (!hostile) {
                    if (c.fd >= 0) {
                        close(c, now);
                    }
                    c.next = now;  // back at once when the attack resumes
                } else if (c.fd < 0 && now >= c.next) {
                    open(c, epoll_fd, now);
                } else if (c.fd >= 0 && c.k == kind::slow && now >= c.next) {
                    send(c, "a");
                    c.next = now + opts_.trickle;
                } else if (c.fd >= 0 && c.k == kind::oversized) {
                    send_oversized(c, now);
                }
            }
            // Brief connections on a schedule of their own: as many as the rate asks for since
            // the attack (re)started, so that a round that ran late catches up.
            if (!hostile || opts_.brief_per_second <= 0) {
                brief_due_base = brief_made;
                brief_since = now;
            } else {
                const double seconds = std::chrono::duration<double>(now - brief_since).count();
                const auto due =
                    brief_due_base + static_cast<std::uint64_t>(seconds * opts_.brief_per_second);
                for (; brief_made < due && !stop_; ++brief_made) {
                    open_brief();
                }
            }
            if (opts_.scrape_every.count() > 0 && now >= next_scrape) {
                (scrape() ? scrapes_ok_ : scrapes_failed_)++;
                next_scrape = now + opts_.scrape_every;
            }
            // Short waits when brief connections are due: a 10 ms wait would send them in
            // bursts of 30 at 3 000 a second.
            const int wait_ms = opts_.brief_per_second > 0 && hostile ? 1 : 10;
            const int n = ::epoll_wait(epoll_fd, events, 64, wait_ms);
            now = clock::now();
            for (int i = 0; i < n; ++i) {
                auto& c = *static_cast<client*>(events[i].data.ptr);
                if (c.fd < 0) {
                    continue;
                }
                if (c.k == kind::unread) {
                    close(c, now);  // only its end is watched for
                    continue;
                }
                // Whatever the endpoint answers is read and dropped; its close ends the client.
                while (true) {
                    const auto got = ::recv(c.fd, drain, sizeof drain, 0);
                    if (got > 0) {
                        continue;
                    }
                    if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                        close(c, now);
                    }
                    break;
                }
            }
        }
        for (auto& c : clients) {
            if (c.fd >= 0) {
                ::close(c.fd);
            }
        }
        ::close(epoll_fd);
        timespec cpu{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
        cpu_seconds_ = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9;
        seconds_running_ = std::chrono::duration<double>(clock::now() - started).count();
    }

    const options opts_;
    const std::string oversized_;
    const std::string pipelined_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> active_{true};
    std::atomic<std::uint64_t> scrapes_ok_{0};
    std::atomic<std::uint64_t> scrapes_failed_{0};
    std::atomic<std::uint64_t> opened_{0};
    std::atomic<std::uint64_t> brief_opened_{0};
    std::atomic<std::uint64_t> connect_failures_{0};
    double cpu_seconds_ = 0;
    double seconds_running_ = 0;
    std::thread thread_;
};

}  // namespace xtel_bench
