#pragma once
// Hostile clients of a Prometheus endpoint on 127.0.0.1, for the benchmark that measures what
// an attack on the endpoint costs the transfers beside it
// (BM_ucx_write/.../prometheus_under_attack) and for the endpoint's stress test
// (tests/unit/prometheus_stress_test.cpp).
//
// One thread (on whichever core the scheduler gives it) keeps `connections` connections open, twice
// the endpoint's limit of 64 so that it keeps closing some to admit others; each is reopened
// `reconnect` after the endpoint closes it. They take turns being one of `mix`:
//   - slow: half a request head, then one more byte every `trickle`, never finishing;
//   - idle: connected, saying nothing;
//   - oversized: a 16 KiB header line (the endpoint answers 431);
//   - body: GET announcing a gigabyte, then 64 KiB of it (413);
//   - brief: a whole request, then closed at once without reading the answer;
//   - unread: 64 pipelined requests, none of the answers read, until the endpoint closes it.
// Every `scrape_every` (0: never) the same thread also scrapes /metrics as Prometheus would,
// with its own connection and a 2 s deadline, and counts whether it got 200.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

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

    struct options {
        std::uint16_t port = 0;
        int connections = 128;
        std::chrono::milliseconds reconnect{100};
        std::chrono::milliseconds trickle{200};
        std::chrono::milliseconds scrape_every{100};
        std::vector<kind> mix{kind::slow, kind::idle, kind::oversized, kind::body};
    };

    explicit hostile_clients(options o) : opts_(o), thread_([this] { run(); }) {}
    ~hostile_clients() { stop(); }
    hostile_clients(const hostile_clients&) = delete;
    hostile_clients& operator=(const hostile_clients&) = delete;

    std::uint64_t scrapes_ok() const { return scrapes_ok_.load(); }
    std::uint64_t scrapes_failed() const { return scrapes_failed_.load(); }
    /// Hostile connections opened so far.
    std::uint64_t opened() const { return opened_.load(); }
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
    };

    int connect_to() const {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -1;
        }
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

    void open(client& c, int epoll_fd, clock::time_point now) {
        c.fd = connect_to();
        if (c.fd < 0) {
            c.next = now + opts_.reconnect;
            return;
        }
        ++opened_;
        ::fcntl(c.fd, F_SETFL, O_NONBLOCK);
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
        static const std::string big_header =
            "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(16384, 'b');
        static const std::string body =
            "GET /metrics HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n" + std::string(65536, 'x');
        static const std::string pipelined = [] {
            std::string r;
            for (int i = 0; i < 64; ++i) {
                r += "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
            }
            return r;
        }();
        switch (c.k) {
            case kind::slow:
                send(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ");
                c.next = now + opts_.trickle;
                break;
            case kind::idle:
                break;
            case kind::oversized:
                send(c, big_header);
                break;
            case kind::body:
                send(c, body);
                break;
            case kind::unread:
                send(c, pipelined);
                break;
            case kind::brief:
                break;
        }
    }

    static void send(const client& c, const std::string& bytes) {
        [[maybe_unused]] const auto n =
            ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }

    void close(client& c, clock::time_point now) {
        ::close(c.fd);
        c.fd = -1;
        c.next = now + opts_.reconnect;
    }

    bool scrape() const {
        const int fd = connect_to();
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
        return answer.rfind("HTTP/1.1 200 OK\r\n", 0) == 0 &&
               answer.find("agent_tx_bytes_total") != std::string::npos;
    }

    void run() {
        const auto started = clock::now();
        const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
        std::vector<client> clients(static_cast<std::size_t>(opts_.connections));
        for (std::size_t i = 0; i < clients.size(); ++i) {
            clients[i].k = opts_.mix[i % opts_.mix.size()];
        }
        auto next_scrape = clock::now();
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
                }
            }
            if (opts_.scrape_every.count() > 0 && now >= next_scrape) {
                (scrape() ? scrapes_ok_ : scrapes_failed_)++;
                next_scrape = now + opts_.scrape_every;
            }
            const int n = ::epoll_wait(epoll_fd, events, 64, 10);
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
    std::atomic<bool> stop_{false};
    std::atomic<bool> active_{true};
    std::atomic<std::uint64_t> scrapes_ok_{0};
    std::atomic<std::uint64_t> scrapes_failed_{0};
    std::atomic<std::uint64_t> opened_{0};
    double cpu_seconds_ = 0;
    double seconds_running_ = 0;
    std::thread thread_;
};

}  // namespace xtel_bench
