// Fuzz target: the Prometheus endpoint's request handling, on the real server. One endpoint
// listens on 127.0.0.1 for the whole run; each input is sent as raw bytes on a new loopback
// connection whose sending side is then closed. The server must answer exactly what
// include/xtel/http/request.hpp predicts for those bytes (the statuses, in order, each a
// well-formed answer, a 200 in the representation include/xtel/http/negotiate.hpp picks for its
// Accept and Accept-Encoding headers), then close; and every 128 inputs a real GET /metrics
// must still get 200 with the agent's metrics. A crash, a hang (10 s), a leak or a wrong answer
// is a finding.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/log.hpp"
#include "xtel/exporters/prometheus.hpp"
#include "xtel/http/negotiate.hpp"
#include "xtel/http/request.hpp"
#include "xtel/http/server.hpp"

namespace {

namespace http = xtel::http;

constexpr std::string_view expected_series =
    R"(agent_tx_bytes_total{agent_name="fuzz",hostname="fuzzhost"} 4096)";

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "fuzz_http_request: %s\n", what);
    std::abort();
}

struct endpoint {
    endpoint() : exporter({context(), metrics}, settings()) {
        // The legacy transfer counters come from transfer records (the metrics processor).
        xtel::transfer_record t;
        t.bytes = 4096;
        t.requests = 1;
        metrics->apply_transfers({&t, 1}, labels);
        metrics->publish();  // as the back end does: the exporter serves what was published
        if (!exporter.active()) {
            finding("the endpoint does not listen");
        }
    }
    static xtel::exporter_context context() {
        static const xtel::config cfg;
        xtel::set_log_level(xtel::log_level::error);
        return {cfg, "fuzz"};
    }
    static xtel::prometheus_settings settings() {
        xtel::prometheus_settings s;
        s.address = {"127.0.0.1", 0};
        return s;
    }
    static xtel::metrics::agent_metrics_settings model() {
        xtel::metrics::agent_metrics_settings s;
        s.hostname = "fuzzhost";
        s.sets = xtel::metrics::family_sets::both;  // the NIXL line below is the one checked
        return s;
    }
    xtel::label_table labels;
    std::shared_ptr<xtel::metrics::agent_metrics> metrics =
        std::make_shared<xtel::metrics::agent_metrics>("fuzz", model());
    xtel::prometheus_exporter exporter;
};

/// What the server must answer: one entry per request it answers, in order.
struct expected_answer {
    int status;
    bool head_only;
    /// For a 200: the representation negotiated.
    xtel::http::representation rep;
};

std::vector<expected_answer> predict(std::string_view bytes) {
    std::vector<expected_answer> out;
    const unsigned limit = xtel::http::limits{}.max_requests_per_connection;
    while (true) {
        const auto r = http::parse_request_head(bytes);
        if (r.status == 0) {
            return out;  // incomplete when the client stops sending: closed unanswered
        }
        const int status = r.status == 200 ? http::route(r.head, "/metrics") : r.status;
        // No answer to HEAD has a body, whatever its status.
        out.push_back(
            {status, r.status == 200 && r.head.method == "HEAD",
             xtel::http::negotiate(r.head.accept.values(), r.head.accept_encoding.values())});
        if (http::closes_after(r, status) || out.size() == limit) {
            return out;
        }
        bytes.remove_prefix(r.head.size);
    }
}

int connect_to(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        finding("socket failed");
    }
    const timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    // Closed with a reset, once the server has closed: the client shuts its side first, so a
    // normal close would leave each of thousands of connections a second in TIME_WAIT, and
    // the loopback runs out of ephemeral ports.
    const linger abort_on_close{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // Out of ephemeral ports (other tests' connections in TIME_WAIT): wait for some, up to 10 s.
    for (int tries = 0; ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0;
         ++tries) {
        if ((errno != EADDRNOTAVAIL && errno != EAGAIN && errno != EINTR) || tries == 1000) {
            std::fprintf(stderr, "fuzz_http_request: connect: %s\n", std::strerror(errno));
            finding("cannot connect to the endpoint");
        }
        ::usleep(10'000);
    }
    return fd;
}

/// Sends `bytes`, closes the sending side and returns everything the server sends until it
/// closes. A send the server cuts short (it answered and closed) is not an error.
std::string exchange(std::uint16_t port, std::string_view bytes) {
    const int fd = connect_to(port);
    while (!bytes.empty()) {
        const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) {
            break;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    ::shutdown(fd, SHUT_WR);
    std::string out;
    char buf[65536];
    while (true) {
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            finding("the server neither answered nor closed within 10 s");
        }
        break;  // the end, or a reset after the answers
    }
    ::close(fd);
    return out;
}

/// The value of header `name` (with its colon) in `head`; empty when absent.
std::string_view header_value(std::string_view head, std::string_view name) {
    const auto at = head.find(std::string("\r\n") + std::string(name) + " ");
    if (at == std::string_view::npos) {
        return {};
    }
    const auto start = at + 2 + name.size() + 1;
    return head.substr(start, head.find("\r\n", start) - start);
}

/// The gzip stream `in` inflated; a finding when it is not one.
std::string gunzip(std::string_view in) {
    z_stream z{};
    if (::inflateInit2(&z, 15 + 16) != Z_OK) {
        finding("inflateInit2 failed");
    }
    std::string out;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
        char buf[65536];
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        rc = ::inflate(&z, Z_NO_FLUSH);
        out.append(buf, sizeof buf - z.avail_out);
    }
    ::inflateEnd(&z);
    if (rc != Z_STREAM_END || z.avail_in != 0) {
        finding("a gzip answer whose body is not one gzip stream");
    }
    return out;
}

/// Takes one answer off the front of `stream`: its status, after checking its form.
int take_answer(std::string_view& stream,
                bool head_only,
                std::string_view& body,
                std::string_view* head_out = nullptr) {
    const auto end = stream.find("\r\n\r\n");
    if (end == std::string_view::npos || stream.substr(0, 9) != "HTTP/1.1 " || end < 12) {
        finding("an answer without a status line and headers");
    }
    const std::string_view head = stream.substr(0, end + 2);
    const int status = std::atoi(std::string(stream.substr(9, 3)).c_str());
    const auto cl = head.find("\r\nContent-Length: ");
    if (cl == std::string_view::npos) {
        finding("an answer without Content-Length");
    }
    const std::size_t length =
        std::strtoull(std::string(head.substr(cl + 18)).c_str(), nullptr, 10);
    const std::size_t sent = head_only ? 0 : length;
    if (stream.size() < end + 4 + sent) {
        finding("an answer shorter than its Content-Length");
    }
    body = stream.substr(end + 4, sent);
    stream.remove_prefix(end + 4 + sent);
    if (head_out != nullptr) {
        *head_out = head;
    }
    return status;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static endpoint server;
    static std::uint64_t runs = 0;
    const std::uint16_t port = server.exporter.port();
    const std::string_view input(reinterpret_cast<const char*>(data), size);

    const auto expected = predict(input);
    const std::string answers = exchange(port, input);
    std::string_view stream = answers;
    for (const auto& e : expected) {
        std::string_view body;
        std::string_view head;
        if (take_answer(stream, e.head_only, body, &head) != e.status) {
            finding("an answer's status is not the predicted one");
        }
        if (e.status != 200) {
            continue;
        }
        if (header_value(head, "Content-Type:") != xtel::http::content_type(e.rep.format)) {
            finding("a 200 answer's Content-Type is not the negotiated format's");
        }
        if ((header_value(head, "Content-Encoding:") == "gzip") != e.rep.gzip) {
            finding("a 200 answer is gzipped when not negotiated, or not when negotiated");
        }
        if (header_value(head, "Vary:") != "Accept, Accept-Encoding") {
            finding("a 200 answer without Vary: Accept, Accept-Encoding");
        }
        const std::string plain = e.rep.gzip && !e.head_only ? gunzip(body) : std::string(body);
        if (!e.head_only && plain.find(expected_series) == std::string_view::npos) {
            finding("a 200 answer without the agent's metrics");
        }
    }
    if (!stream.empty()) {
        finding("the server sent more answers than predicted");
    }

    if (++runs % 128 == 0) {
        const std::string scrape = exchange(port, "GET /metrics HTTP/1.1\r\nHost: fuzz\r\n\r\n");
        std::string_view s = scrape, body;
        if (take_answer(s, false, body) != 200 ||
            body.find(expected_series) == std::string_view::npos) {
            finding("a real scrape no longer gets 200 with the metrics");
        }
    }
    return 0;
}
