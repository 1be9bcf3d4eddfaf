// Puts two HTTP servers of the same metrics body through the hostile-client table of
// docs/reliability.md, to decide by measurement which one the Prometheus endpoint uses:
//   own          the endpoint's server (include/xtel/http/server.hpp), default limits;
//   mhd ...      libmicrohttpd with an internal epoll thread, in the settings named on its line.
// In each row an attacker (source address 127.0.0.2) runs while a scraper (127.0.0.1) asks for
// /metrics `scrapes` times, 200 ms apart; a scrape counts when it gets 200 with the whole body
// within 2 s. Usage: http_server_compare [scrapes] [server name filter] [row name filter]

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "xtel/http/request.hpp"
#include "xtel/http/server.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

constexpr auto scrape_deadline = std::chrono::seconds(2);
constexpr auto scrape_spacing = ms(200);

/// About what an agent with a few hundred series serves.
std::string metrics_body() {
    std::string out;
    for (int i = 0; i < 300; ++i) {
        out += fmt::format(
            "# HELP agent_metric_{0}_total A counter.\n# TYPE agent_metric_{0}_total counter\n"
            "agent_metric_{0}_total{{agent_name=\"a1\",hostname=\"h\"}} {1}\n",
            i, i * 1000 + 7);
    }
    return out;
}

sockaddr_in loopback(const char* ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

/// A non-blocking socket from `source`, connecting (or connected) to 127.0.0.1:port.
int open_client(const char* source, std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    const auto from = loopback(source, 0);
    const auto to = loopback("127.0.0.1", port);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
        (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 &&
         errno != EINPROGRESS)) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// ---- the scraper ---------------------------------------------------------------------------

/// One scrape as Prometheus does it: true when 200 with exactly `body` came within the deadline.
bool scrape(std::uint16_t port, const std::string& body) {
    const auto deadline = clock_type::now() + scrape_deadline;
    const int fd = open_client("127.0.0.1", port);
    if (fd < 0) {
        return false;
    }
    const std::string request =
        "GET /metrics HTTP/1.1\r\nHost: prometheus\r\nAccept: text/plain\r\n"
        "Connection: close\r\n\r\n";
    std::size_t sent = 0;
    std::string answer;
    bool ok = false;
    while (true) {
        const auto left = std::chrono::ceil<ms>(deadline - clock_type::now()).count();
        if (left <= 0) {
            break;
        }
        pollfd p{fd, static_cast<short>(sent < request.size() ? POLLOUT : POLLIN), 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0) {
            continue;
        }
        if (sent < request.size()) {
            const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN) {
                break;
            }
            sent += n > 0 ? static_cast<std::size_t>(n) : 0;
            continue;
        }
        char buf[65536];
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            answer.append(buf, static_cast<std::size_t>(n));
        }
        const auto end = answer.find("\r\n\r\n");
        if (end != std::string::npos && answer.size() - end - 4 >= body.size()) {
            ok = answer.starts_with("HTTP/1.1 200") &&
                 answer.compare(end + 4, body.size(), body) == 0;
            break;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            break;
        }
    }
    ::close(fd);
    return ok;
}

// ---- the attacker --------------------------------------------------------------------------

/// A row of the table: what each hostile client does.
struct attack {
    std::string name;
    /// Clients at once; with `over_limit`, this many more than the server's connection limit.
    int clients = 0;
    bool over_limit = false;
    /// Sent on connecting (as much as the socket takes, the rest later).
    std::string opening;
    /// Then one byte of this every `trickle_every`, if not empty.
    std::string trickle;
    ms trickle_every{0};
    /// The client closes after this long; 0: only when the server closes.
    ms hold{0};
    /// Whether it reads what the server sends (clients that pipeline do not).
    bool reads = true;
    /// New connections a second, at most; 0: as fast as they close.
    int opens_per_second = 0;
    /// Source addresses the clients take turns using: 127.0.0.2 and up.
    int sources = 1;
};

class attacker {
  public:
    attacker(std::uint16_t port, const attack& a, int clients)
        : port_(port), a_(a), clients_(static_cast<std::size_t>(clients)) {
        thread_ = std::thread([this] { run(); });
    }
    ~attacker() {
        stop_ = true;
        thread_.join();
    }
    std::uint64_t opened() const { return opened_.load(); }

  private:
    struct client {
        int fd = -1;
        std::size_t sent = 0;  // of the opening
        clock_type::time_point opened_at{};
        clock_type::time_point next_byte{};
    };

    void open(client& c, int ep, clock_type::time_point now) {
        const auto index = static_cast<int>(&c - clients_.data());
        const std::string source = fmt::format("127.0.0.{}", 2 + index % a_.sources);
        c.fd = open_client(source.c_str(), port_);
        if (c.fd < 0) {
            return;
        }
        ++opened_;
        c.sent = 0;
        c.opened_at = now;
        c.next_byte = now + a_.trickle_every;
        epoll_event ev{};
        ev.events = (a_.reads ? EPOLLIN : 0u) | EPOLLRDHUP;
        ev.data.ptr = &c;
        ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    }

    static void close(client& c) {
        ::close(c.fd);
        c.fd = -1;
    }

    void push(client& c, clock_type::time_point now) {
        if (c.sent < a_.opening.size()) {
            const auto n = ::send(c.fd, a_.opening.data() + c.sent, a_.opening.size() - c.sent,
                                  MSG_NOSIGNAL | MSG_DONTWAIT);
            c.sent += n > 0 ? static_cast<std::size_t>(n) : 0;
        } else if (!a_.trickle.empty() && now >= c.next_byte) {
            [[maybe_unused]] const auto n =
                ::send(c.fd, a_.trickle.data(), 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            c.next_byte = now + a_.trickle_every;
        }
    }

    void run() {
        const int ep = ::epoll_create1(EPOLL_CLOEXEC);
        auto budget_start = clock_type::now();
        std::uint64_t opened_in_budget = 0;
        std::vector<epoll_event> events(256);
        std::vector<char> drain(65536);
        while (!stop_) {
            const auto now = clock_type::now();
            for (auto& c : clients_) {
                if (c.fd >= 0 && a_.hold.count() > 0 && now - c.opened_at >= a_.hold) {
                    close(c);
                }
                if (c.fd < 0) {
                    if (a_.opens_per_second > 0) {
                        const auto allowed = static_cast<std::uint64_t>(
                            std::chrono::duration<double>(now - budget_start).count() *
                            a_.opens_per_second);
                        if (opened_in_budget >= allowed) {
                            continue;
                        }
                        ++opened_in_budget;
                    }
                    open(c, ep, now);
                }
                if (c.fd >= 0) {
                    push(c, now);
                }
            }
            const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 5);
            for (int i = 0; i < n; ++i) {
                auto& c = *static_cast<client*>(events[i].data.ptr);
                if (c.fd < 0) {
                    continue;
                }
                if (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                    close(c);  // the server closed it: come back, as an attacker would
                    continue;
                }
                while (::recv(c.fd, drain.data(), drain.size(), 0) > 0) {
                }
            }
            if (a_.opens_per_second > 0 && now - budget_start > std::chrono::seconds(1)) {
                budget_start = now;
                opened_in_budget = 0;
            }
        }
        for (auto& c : clients_) {
            if (c.fd >= 0) {
                close(c);
            }
        }
        ::close(ep);
    }

    const std::uint16_t port_;
    const attack a_;
    std::vector<client> clients_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> opened_{0};
    std::thread thread_;
};

// ---- the servers ---------------------------------------------------------------------------

/// A server under test, listening on 127.0.0.1.
struct server {
    std::string name;
    /// Connections it keeps open at once.
    int connection_limit = 0;
    std::function<std::shared_ptr<void>(const std::string& body, std::uint16_t& port)> start;
};

server own_server() {
    return {"own (src/http, 64 connections, 5 s per request head)",
            static_cast<int>(xtel::http::limits{}.max_connections),
            [](const std::string& body, std::uint16_t& port) {
                auto shared = std::make_shared<const std::string>(body);
                auto s = std::make_shared<xtel::http::server>(
                    xtel::host_port{"127.0.0.1", 0}, "/metrics", "",
                    [shared](const xtel::http::request_head&) {
                        return xtel::http::entity{
                            shared, "text/plain; version=0.0.4; charset=utf-8", false};
                    });
                port = s->bound().port;
                return std::shared_ptr<void>(s);
            }};
}

MHD_Result answer_metrics(void* cls,
                          MHD_Connection* connection,
                          const char* url,
                          const char* method,
                          const char*,
                          const char*,
                          size_t*,
                          void**) {
    auto* response = static_cast<MHD_Response*>(cls);
    if (std::string_view(method) != "GET" && std::string_view(method) != "HEAD") {
        return MHD_NO;  // closes the connection
    }
    if (std::string_view(url) != "/metrics") {
        return MHD_NO;
    }
    return MHD_queue_response(connection, MHD_HTTP_OK, response);
}

struct mhd_settings {
    unsigned connections = 64;
    unsigned timeout_s = 5;
    std::size_t memory_limit = 32 << 10;
    unsigned per_ip = 0;  // 0: no per-address limit
};

server mhd_server(mhd_settings m) {
    std::string name = fmt::format("mhd (epoll thread, {} connections, {} s idle timeout, {} KiB",
                                   m.connections, m.timeout_s, m.memory_limit >> 10);
    name += m.per_ip != 0 ? fmt::format(", {} per address)", m.per_ip) : ")";
    return {name, static_cast<int>(m.connections),
            [m](const std::string& body, std::uint16_t& port) {
                MHD_Response* response = MHD_create_response_from_buffer(
                    body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
                MHD_add_response_header(response, "Content-Type",
                                        "text/plain; version=0.0.4; charset=utf-8");
                auto addr = loopback("127.0.0.1", 0);
                MHD_Daemon* d = MHD_start_daemon(
                    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, nullptr, nullptr,
                    &answer_metrics, response, MHD_OPTION_SOCK_ADDR,
                    reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_CONNECTION_LIMIT, m.connections,
                    MHD_OPTION_CONNECTION_TIMEOUT, m.timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                    m.memory_limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT, m.per_ip,
                    MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096, MHD_OPTION_END);
                if (d == nullptr) {
                    std::fprintf(stderr, "MHD_start_daemon failed\n");
                    std::exit(1);
                }
                port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
                return std::shared_ptr<void>(d, [response](void* p) {
                    MHD_stop_daemon(static_cast<MHD_Daemon*>(p));
                    MHD_destroy_response(response);
                });
            }};
}

std::vector<attack> rows() {
    const std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    std::string pipelined;
    for (int i = 0; i < 100; ++i) {
        pipelined += head + "\r\n";
    }
    std::vector<attack> out;
    out.push_back({.name = "500 idle connections", .clients = 500});
    out.push_back({.name = "a 1 MB header (16 clients, again on close)",
                   .clients = 16,
                   .opening = head + "X-Big: " + std::string(1 << 20, 'b') + "\r\n\r\n"});
    // A byte every 0.5 s: libmicrohttpd's idle timeout counts whole seconds, 1 at least.
    out.push_back({.name = "slowloris: limit + 50 clients, a header byte every 0.5 s",
                   .clients = 50,
                   .over_limit = true,
                   .opening = head + "X-Slow: ",
                   .trickle = "a",
                   .trickle_every = ms(500)});
    out.push_back({.name = "the same from 16 addresses",
                   .clients = 50,
                   .over_limit = true,
                   .opening = head + "X-Slow: ",
                   .trickle = "a",
                   .trickle_every = ms(500),
                   .sources = 16});
    out.push_back({.name = "pipelined unread: limit + 50 clients, 100 GETs each",
                   .clients = 50,
                   .over_limit = true,
                   .opening = pipelined,
                   .reads = false});
    out.push_back({.name = "1,000 new connections a second, each a partial request for 100 ms",
                   .clients = 200,
                   .opening = head,
                   .hold = ms(100),
                   .opens_per_second = 1000});
    return out;
}

/// One cell of the table: the server under one attack. Prints its line before the server
/// stops, so that a crash while stopping leaves the scrapes' count on record.
void measure(const attack& row, const server& s, const std::string& body, int scrapes) {
    std::uint16_t port = 0;
    const auto running = s.start(body, port);
    int ok = 0;
    ms slowest{0};
    std::uint64_t opened = 0;
    {
        const attacker a(port, row,
                         row.over_limit ? s.connection_limit + row.clients : row.clients);
        std::this_thread::sleep_for(std::chrono::seconds(2));  // the attack sets in
        for (int i = 0; i < scrapes; ++i) {
            const auto t0 = clock_type::now();
            ok += scrape(port, body) ? 1 : 0;
            slowest = std::max(slowest, std::chrono::duration_cast<ms>(clock_type::now() - t0));
            std::this_thread::sleep_for(scrape_spacing);
        }
        opened = a.opened();
    }
    fmt::print("| {} | {} | {} of {} | {} ms | {} |\n", row.name, s.name, ok, scrapes,
               slowest.count(), opened);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const int scrapes = argc > 1 ? std::atoi(argv[1]) : 10;
    const std::string server_filter = argc > 2 ? argv[2] : "";
    const std::string row_filter = argc > 3 ? argv[3] : "";
    rlimit r{};
    ::getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);

    const std::string body = metrics_body();
    std::vector<server> servers = {own_server(), mhd_server({}), mhd_server({.timeout_s = 1}),
                                   mhd_server({.connections = 1000}), mhd_server({.per_ip = 8})};
    fmt::print("body {} bytes; {} scrapes per row, 200 ms apart, 2 s each\n\n", body.size(),
               scrapes);
    fmt::print(
        "| Row | Server | Scrapes with 200 and the whole body | Slowest | Attack connections "
        "opened |\n|---|---|---:|---:|---:|\n");
    for (const auto& row : rows()) {
        if (row.name.find(row_filter) == std::string::npos) {
            continue;
        }
        for (const auto& s : servers) {
            if (s.name.find(server_filter) == std::string::npos) {
                continue;
            }
            // Each cell in its own process: one server's crash must not take the table with it.
            std::fflush(stdout);
            const pid_t child = ::fork();
            if (child != 0) {
                int status = 0;
                ::waitpid(child, &status, 0);
                if (WIFSIGNALED(status)) {
                    fmt::print("| {} | {} | the process died of signal {} (see above) | | |\n",
                               row.name, s.name, WTERMSIG(status));
                }
                continue;
            }
            measure(row, s, body, scrapes);
            std::fflush(stdout);
            std::_Exit(0);
        }
    }
}
