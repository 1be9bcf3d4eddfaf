#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "exporters/prometheus/prometheus_endpoint.hpp"
#include "prometheus_fixtures.hpp"
#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/http/negotiate.hpp"

namespace prometheus_http_test {

using prom_test::exporter_under_test;
using prom_test::log_capture;
using prom_test::tx_transfer;

namespace {

/// A loopback TCP socket, closed on destruction.
class socket_fd {
  public:
    socket_fd() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {}
    ~socket_fd() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    socket_fd(const socket_fd&) = delete;
    socket_fd& operator=(const socket_fd&) = delete;

    int get() const noexcept { return fd_; }

    static sockaddr_in loopback(std::uint16_t port) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return a;
    }

  private:
    int fd_;
};

/// True once `response` holds a whole answer: its headers and Content-Length bytes of body.
bool complete(const std::string& response) {
    const auto end = response.find("\r\n\r\n");
    if (end == std::string::npos) {
        return false;
    }
    const auto length = response.find("Content-Length: ");
    const auto body = length < end ? std::stoul(response.substr(length + 16)) : 0;
    return response.size() >= end + 4 + body;
}

/// Sends `request` as raw bytes and returns the answer, or what came before the server closed or 3
/// s passed. `half_close` ends the sending side, as a client that gives up mid-request does.
std::string raw_exchange(std::uint16_t port, const std::string& request, bool half_close = false) {
    const socket_fd s;
    const timeval timeout{3, 0};
    ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    const auto addr = socket_fd::loopback(port);
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        return "connect failed";
    }
    if (::send(s.get(), request.data(), request.size(), MSG_NOSIGNAL) < 0) {
        return "send failed";
    }
    if (half_close) {
        ::shutdown(s.get(), SHUT_WR);
    }
    std::string out;
    char buf[4096];
    for (int i = 0; i < 1000 && !complete(out); ++i) {
        const auto n = ::recv(s.get(), buf, sizeof buf, 0);
        if (n <= 0) {
            break;
        }
        out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
}

httplib::Client client_for(const xtel::prometheus_exporter& e) {
    httplib::Client c("127.0.0.1", e.port());
    c.set_connection_timeout(2);
    c.set_read_timeout(5);
    return c;
}

/// The value on the first line of `text` that starts with `series`; empty when none.
std::string value_of(const std::string& text, std::string_view series) {
    const auto at = text.find("\n" + std::string(series));
    if (at == std::string::npos) {
        return {};
    }
    const auto space = text.find("} ", at);
    const auto end = text.find('\n', space);
    return text.substr(space + 2, end - space - 2);
}

/// What Prometheus 2.42 sends as Accept when it scrapes (OpenMetrics first).
constexpr const char* prometheus_accept =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// What Prometheus 2.42 sends with --enable-feature=native-histograms (protobuf first).
constexpr const char* prometheus_native_histograms_accept =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,"
    "application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A client that leaves gzip bodies as they came (httplib would refuse them, built without
/// zlib), so that the test inflates them itself.
httplib::Client raw_client_for(const xtel::prometheus_exporter& e) {
    auto c = client_for(e);
    c.set_decompress(false);
    return c;
}

/// `in` inflated from one whole gzip stream; "not gzip" when it is not one.
std::string gunzip(const std::string& in) {
    z_stream z{};
    REQUIRE(::inflateInit2(&z, 15 + 16) == Z_OK);
    std::string out;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
        char buf[16384];
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        rc = ::inflate(&z, Z_NO_FLUSH);
        out.append(buf, sizeof buf - z.avail_out);
    }
    const bool whole = rc == Z_STREAM_END && z.avail_in == 0;
    ::inflateEnd(&z);
    return whole ? out : "not gzip";
}

std::string status_line(const std::string& response) {
    return response.substr(0, response.find("\r\n"));
}

xtel::config prometheus_config(std::string address) {
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {"prometheus"};
    cfg.output_path = std::move(address);
    return cfg;
}

}  // namespace

TEST_CASE("GET /metrics answers 200 with the exposition text and its content type", "[http]") {
    exporter_under_test t;
    t.flush(tx_transfer(123, 1, 1));
    auto c = client_for(t.exporter);
    const auto res = c.Get("/metrics");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(res->body == t.exporter.scrape());
    CHECK(res->body.find(R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 123)") !=
          std::string::npos);
}

TEST_CASE("HEAD /metrics answers 200 without a body", "[http]") {
    exporter_under_test t;
    auto c = client_for(t.exporter);
    const auto res = c.Head("/metrics");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->body.empty());
}

TEST_CASE("paths other than /metrics answer 404", "[http]") {
    exporter_under_test t;
    auto c = client_for(t.exporter);
    for (const char* path : {"/", "/metric", "/metrics/", "/metrics/x", "/api/v1/query"}) {
        INFO(path);
        const auto res = c.Get(path);
        REQUIRE(res);
        CHECK(res->status == 404);
    }
    const auto post = c.Post("/other", "x", "text/plain");
    REQUIRE(post);
    CHECK(post->status == 404);
}

TEST_CASE("other methods on /metrics answer 405 and say which are allowed", "[http]") {
    exporter_under_test t;
    auto c = client_for(t.exporter);
    std::vector<httplib::Result> results;
    results.push_back(c.Post("/metrics", "x", "text/plain"));
    results.push_back(c.Put("/metrics", "x", "text/plain"));
    results.push_back(c.Patch("/metrics", "x", "text/plain"));
    results.push_back(c.Delete("/metrics"));
    results.push_back(c.Options("/metrics"));
    for (const auto& res : results) {
        REQUIRE(res);
        CHECK(res->status == 405);
        CHECK(res->get_header_value("Allow") == "GET, HEAD");
    }
    const auto started = std::chrono::steady_clock::now();
    const auto bodyless =
        raw_exchange(t.exporter.port(), "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(status_line(bodyless) == "HTTP/1.1 405 Method Not Allowed");
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
    const auto trace = raw_exchange(t.exporter.port(),
                                    "TRACE /metrics HTTP/1.1\r\nHost: x\r\n"
                                    "Connection: close\r\n\r\n");
    CHECK(status_line(trace) == "HTTP/1.1 405 Method Not Allowed");
    CHECK(trace.find("Allow: GET, HEAD\r\n") != std::string::npos);
}

TEST_CASE("malformed requests and unwanted bodies get clean answers and the endpoint goes on",
          "[http]") {
    exporter_under_test t;
    const auto port = t.exporter.port();
    CHECK(status_line(raw_exchange(port, "HELLO\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
    CHECK(status_line(raw_exchange(port, "GET /" + std::string(10000, 'm') +
                                             " HTTP/1.1\r\n\r\n")) == "HTTP/1.1 414 URI Too Long");
    const std::string big(1 << 20, 'x');
    const auto unread = raw_exchange(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                               std::to_string(big.size()) + "\r\n\r\n" + big);
    CHECK(status_line(unread) == "HTTP/1.1 405 Method Not Allowed");
    CHECK(unread.find("Connection: close\r\n") != std::string::npos);
    CHECK(raw_exchange(port, "GET /metrics HTTP/1.1\r\n", true).empty());
    auto c = client_for(t.exporter);
    const auto res = c.Get("/metrics");
    REQUIRE(res);
    CHECK(res->status == 200);
}

TEST_CASE("port 0 picks a free port and logs the address chosen", "[http]") {
    const log_capture logs;
    exporter_under_test t;
    REQUIRE(t.exporter.active());
    CHECK(t.exporter.port() != 0);
    CHECK(t.exporter.address() == "127.0.0.1:" + std::to_string(t.exporter.port()));
    CHECK_FALSE(
        logs.find(xtel::log_level::info, "serving http://" + t.exporter.address() + "/metrics")
            .empty());
}

TEST_CASE("a taken port is an error in the log and the agent goes on transferring", "[http]") {
    const socket_fd holder;
    auto addr = socket_fd::loopback(0);
    REQUIRE(::bind(holder.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(holder.get(), 1) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    const auto taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

    const log_capture logs;
    const auto cfg = prometheus_config(taken);
    xtel::prometheus_telemetry t(cfg, "busy", {.start_flusher = false});
    const auto message = logs.find(xtel::log_level::error, "cannot listen on " + taken);
    CHECK(message.find("the port is already in use") != std::string::npos);
    CHECK(message.find("agent 'busy'") != std::string::npos);
    CHECK_FALSE(t.get<xtel::prometheus_exporter>().active());

    for (int i = 0; i < 100; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 4096, 1, 1, 1);
    }
    t.flush();
    CHECK(t.stats().events_exported == 400);
    CHECK(t.stats().export_errors == 0);
    CHECK(t.stats().events_lost == 400);  // the back end counts what the inactive sink loses

    // A transfer another agent notified this one of makes no event: none is lost.
    t.record_notified(1, 4096, xtel::transfer_attributes{});
    t.flush();
    CHECK(t.stats().events_lost == 400);
}

TEST_CASE("a malformed address stops the pipeline at set-up with a config_error", "[http]") {
    const auto cfg = prometheus_config("127.0.0.1:99999");
    CHECK_THROWS_AS(xtel::prometheus_telemetry(cfg, "a", {.start_flusher = false}),
                    xtel::config_error);
}

TEST_CASE("a fixed port is free again as soon as the last exporter on it goes", "[http]") {
    std::uint16_t port = 0;
    {
        exporter_under_test first;
        port = first.exporter.port();
    }
    const auto fixed = "127.0.0.1:" + std::to_string(port);
    CHECK(raw_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n") == "connect failed");
    exporter_under_test again("a1", {10}, fixed);
    CHECK(again.exporter.active());
    CHECK(again.exporter.port() == port);
}

TEST_CASE("recording loses nothing while scrapes run at the same time", "[http][concurrency]") {
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    auto cfg = prometheus_config("127.0.0.1:0");
    cfg.run_interval = std::chrono::milliseconds(5);
    xtel::prometheus_telemetry t(cfg, "busy_scraped", {.staging_capacity = 1 << 16});
    auto& e = t.get<xtel::prometheus_exporter>();
    REQUIRE(e.active());
    std::atomic<bool> done{false};
    std::atomic<int> scrapes{0};
    std::thread scraper([&] {
        auto c = client_for(e);
        for (int i = 0; i < 100000 && !done.load(); ++i) {
            if (const auto res = c.Get("/metrics"); res && res->status == 200) {
                ++scrapes;
            }
        }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (scrapes.load() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Record in bursts until several scrapes have overlapped the recording.
    const int first = scrapes.load();
    std::uint64_t transfers = 0;
    while ((scrapes.load() - first < 5 || transfers < 50000) &&
           std::chrono::steady_clock::now() < deadline) {
        for (int i = 0; i < 1000; ++i, ++transfers) {
            t.record_transfer(xtel::direction::tx, transfers, 1000, 1, 1, transfers % 300);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const int overlapping = scrapes.load() - first;
    t.flush();
    done = true;
    scraper.join();
    CHECK(overlapping >= 5);
    CHECK(t.stats().records_dropped == 0);
    const auto text = e.scrape();
    CHECK(value_of(text, R"(agent_tx_bytes_total{agent_name="busy_scraped")") ==
          std::to_string(transfers * 1000));
    CHECK(value_of(text, R"(agent_tx_requests_num_total{agent_name="busy_scraped")") ==
          std::to_string(transfers));
}

TEST_CASE(
    "the buffer and prometheus pipeline records each transfer in the flight recorder and on "
    "/metrics",
    "[http]") {
    const xtel_test::temp_dir dir;
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {"buffer", "prometheus"};
    cfg.output_path = dir.path().string();
    xtel::buffer_prometheus_telemetry t(cfg, "both", {.start_flusher = false});
    for (int i = 0; i < 10; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 100, 1, 1, 1);
    }
    t.flush();

    std::uint64_t recorded = 0;
    xtel::flight_recorder::reader r(t.get<xtel::buffer_exporter>().path());
    r.poll([&](const xtel::event& e) {
        if (e.name_view() == "agent_tx_bytes") {
            recorded += e.value;
        }
    });
    CHECK(recorded == 1000);
    auto& prom = t.get<xtel::prometheus_exporter>();
    REQUIRE(prom.active());
    CHECK(value_of(prom.scrape(), R"(agent_tx_bytes_total{agent_name="both")") == "1000");
}

TEST_CASE("GET /metrics with the accept header of prometheus 2.42 answers openmetrics", "[http]") {
    exporter_under_test t;
    t.flush(tx_transfer(123, 1, 1));
    auto c = raw_client_for(t.exporter);
    const auto res = c.Get("/metrics", {{"Accept", prometheus_accept}});
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type") ==
          "application/openmetrics-text; version=1.0.0; charset=utf-8");
    CHECK_FALSE(res->has_header("Content-Encoding"));
    CHECK(res->get_header_value("Vary") == "Accept, Accept-Encoding");
    CHECK(res->body.find("# TYPE agent_tx_bytes counter\n") != std::string::npos);
    CHECK(res->body.find(R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 123)") !=
          std::string::npos);
    CHECK(res->body.ends_with("\n# EOF\n"));
}

TEST_CASE(
    "GET /metrics with the accept header of prometheus 2.42 with native histograms answers "
    "protobuf",
    "[http]") {
    exporter_under_test t;
    t.flush(tx_transfer(123, 1, 1));
    auto c = raw_client_for(t.exporter);
    const auto res = c.Get("/metrics", {{"Accept", prometheus_native_histograms_accept}});
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type") ==
          "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
          "encoding=delimited");
    CHECK(res->get_header_value("Vary") == "Accept, Accept-Encoding");
    // A family's message: field 1 (its name), 18 bytes long.
    REQUIRE(res->body.size() > 3);
    CHECK(res->body.find("\x0A\x12"
                         "agent_errors_total") != std::string::npos);
    CHECK(res->body.find("agent_tx_bytes_total") != std::string::npos);
    CHECK(res->body.find("# EOF") == std::string::npos);
}

TEST_CASE("GET /metrics without preferences answers text that says what it varies by", "[http]") {
    exporter_under_test t;
    auto c = raw_client_for(t.exporter);
    const auto res = c.Get("/metrics", {{"Accept", "*/*"}});
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
    CHECK_FALSE(res->has_header("Content-Encoding"));
    CHECK(res->get_header_value("Vary") == "Accept, Accept-Encoding");
    CHECK(res->body == t.exporter.scrape());
}

TEST_CASE("GET /metrics with gzip accepted answers gzip that inflates to the plain body",
          "[http]") {
    exporter_under_test t;
    t.flush(tx_transfer(4096, 3, 50));
    auto c = raw_client_for(t.exporter);
    for (const char* accept : {"*/*", prometheus_accept, prometheus_native_histograms_accept}) {
        INFO("Accept: " << accept);
        const auto plain = c.Get("/metrics", {{"Accept", accept}});
        const auto zipped = c.Get("/metrics", {{"Accept", accept}, {"Accept-Encoding", "gzip"}});
        REQUIRE(plain);
        REQUIRE(zipped);
        CHECK(zipped->status == 200);
        CHECK(zipped->get_header_value("Content-Encoding") == "gzip");
        CHECK(zipped->get_header_value("Content-Type") == plain->get_header_value("Content-Type"));
        CHECK(zipped->get_header_value("Vary") == "Accept, Accept-Encoding");
        CHECK(zipped->body.size() < plain->body.size());
        CHECK(gunzip(zipped->body) == plain->body);
    }
}

TEST_CASE("HEAD /metrics answers the negotiated representation's headers without a body",
          "[http]") {
    exporter_under_test t;
    t.flush(tx_transfer(4096, 3, 50));
    auto c = raw_client_for(t.exporter);
    const httplib::Headers asks = {{"Accept", prometheus_accept}, {"Accept-Encoding", "gzip"}};
    const auto get = c.Get("/metrics", asks);
    const auto head = c.Head("/metrics", asks);
    REQUIRE(get);
    REQUIRE(head);
    CHECK(head->status == 200);
    CHECK(head->body.empty());
    CHECK(head->get_header_value("Content-Encoding") == "gzip");
    CHECK(head->get_header_value("Content-Type") ==
          "application/openmetrics-text; version=1.0.0; charset=utf-8");
    CHECK(head->get_header_value("Content-Length") == std::to_string(get->body.size()));
}

TEST_CASE("answers other than 200 are neither gzipped nor marked as varying", "[http]") {
    exporter_under_test t;
    const auto res =
        raw_exchange(t.exporter.port(),
                     "GET /other HTTP/1.1\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n");
    CHECK(status_line(res) == "HTTP/1.1 404 Not Found");
    CHECK(res.find("Content-Encoding") == std::string::npos);
    CHECK(res.find("Vary") == std::string::npos);
}

TEST_CASE("every representation shows a flush round that changed the metrics", "[http]") {
    exporter_under_test t;
    auto c = raw_client_for(t.exporter);
    const std::string line = R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} )";
    const std::vector<httplib::Headers> asks = {
        {{"Accept", "*/*"}},
        {{"Accept", "*/*"}, {"Accept-Encoding", "gzip"}},
        {{"Accept", prometheus_accept}},
        {{"Accept", prometheus_accept}, {"Accept-Encoding", "gzip"}},
    };
    const auto body_of = [&](const httplib::Headers& h) {
        const auto res = c.Get("/metrics", h);
        REQUIRE(res);
        return res->has_header("Content-Encoding") ? gunzip(res->body) : res->body;
    };
    for (const auto& h : asks) {
        CHECK(body_of(h).find(line + "0\n") != std::string::npos);
    }
    t.flush(tx_transfer(77, 1, 1));
    for (const auto& h : asks) {
        CHECK(body_of(h).find(line + "77\n") != std::string::npos);
    }
}

TEST_CASE("the endpoint renders each representation once until the snapshots change", "[http]") {
    using xtel::http::representation;
    using xtel::metrics::exposition;
    const auto e = xtel::detail::prometheus_endpoint::acquire({"127.0.0.1", 0});
    const representation all[] = {{exposition::text, false},        {exposition::text, true},
                                  {exposition::openmetrics, false}, {exposition::openmetrics, true},
                                  {exposition::protobuf, false},    {exposition::protobuf, true}};
    for (const auto r : all) {
        // The same body, not rendered again. The process metrics are read anew once a second,
        // which renders again: at most once in these few calls, so one retry covers it.
        auto first = e->render_shared(r);
        if (auto second = e->render_shared(r); second != first) {
            first = std::move(second);
        }
        CHECK(e->render_shared(r) == first);
    }
    // No agent attached: only the process's own families, once, without agent_name.
    const auto om = e->render_shared({exposition::openmetrics, false});
    CHECK(om->starts_with(
        "# TYPE process_cpu_seconds counter\n# UNIT process_cpu_seconds seconds\n"));
    CHECK(om->ends_with("# EOF\n"));
    CHECK(om->find("agent_name") == std::string::npos);
    const auto text = e->render_shared({exposition::text, false});
    CHECK(text->find("# TYPE process_cpu_seconds_total counter\n") != std::string::npos);
    CHECK(text->find("# EOF") == std::string::npos);
    // Each compressed body is its plain one, when read within the same second.
    const auto om_gz = e->render_shared({exposition::openmetrics, true});
    if (e->render_shared({exposition::openmetrics, false}) == om) {
        CHECK(gunzip(*om_gz) == *om);
    }
    const auto text_gz = e->render_shared({exposition::text, true});
    if (e->render_shared({exposition::text, false}) == text) {
        CHECK(gunzip(*text_gz) == *text);
    }
    const auto pb = e->render_shared({exposition::protobuf, false});
    const auto pb_gz = e->render_shared({exposition::protobuf, true});
    CHECK(pb->find("process_cpu_seconds_total") != std::string::npos);
    if (e->render_shared({exposition::protobuf, false}) == pb) {
        CHECK(gunzip(*pb_gz) == *pb);
    }
}

}  // namespace prometheus_http_test
