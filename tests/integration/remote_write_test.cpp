// The remote-write client against a real Prometheus with its receiver on: what it pushes is
// queryable, and bodies pushed while the receiver is down arrive once it is up.

#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/remote_write.hpp"
#include "prometheus_support.hpp"

using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::temp_dir;
using namespace std::chrono_literals;
using namespace xtel;

namespace {

/// A Prometheus server on `port` that scrapes nothing and takes remote writes at /api/v1/write;
/// its log and data in `dir`.
struct prometheus_receiver {
    prometheus_receiver(const std::filesystem::path& dir, std::uint16_t port)
        : port(port), log(dir / "prometheus.log") {
        prom_it::write_file(dir / "prometheus.yml", "scrape_configs: []\n");
        server.emplace(
            spawn_options{{XTEL_PROMETHEUS, "--config.file=" + (dir / "prometheus.yml").string(),
                           "--storage.tsdb.path=" + (dir / "data").string(),
                           fmt::format("--web.listen-address=127.0.0.1:{}", port),
                           "--log.level=warn", "--web.enable-remote-write-receiver"},
                          {},
                          {},
                          log});
    }

    /// The value of the first series `query` answers, asked until it is `expected` or 60 s
    /// pass; the last value seen.
    std::string query_until(const std::string& query, const std::string& expected) {
        httplib::Client api("127.0.0.1", port);
        api.set_connection_timeout(1);
        api.set_read_timeout(5);
        std::string last;
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (std::chrono::steady_clock::now() < deadline && !server->exited()) {
            if (const auto res = api.Get("/api/v1/query?query=" + query);
                res && res->status == 200) {
                last = first_value(res->body);
                if (last == expected) {
                    break;
                }
            }
            std::this_thread::sleep_for(250ms);
        }
        return last;
    }

    /// The sample value of the first series in a /api/v1/query answer; empty when none.
    static std::string first_value(const std::string& json) {
        const auto at = json.find("\"value\":[");
        if (at == std::string::npos) {
            return {};
        }
        const auto open = json.find('"', json.find(',', at));
        const auto close = json.find('"', open + 1);
        return open == std::string::npos || close == std::string::npos
                   ? std::string()
                   : json.substr(open + 1, close - open - 1);
    }

    std::string url() const { return fmt::format("http://127.0.0.1:{}/api/v1/write", port); }

    std::uint16_t port;
    std::filesystem::path log;
    std::optional<child_process> server;
};

/// An agent's snapshot with the counter xtel_rw_test_total{agent_name="a",pid="1"} = 12345.
std::vector<std::shared_ptr<const metrics::snapshot>> counter_snapshot() {
    auto snap = std::make_shared<metrics::snapshot>();
    snap->labels = {{"agent_name", "a"}};
    metrics::family_snapshot f;
    f.spec = {"xtel_rw_test_total", "A test counter.", metrics::metric_type::counter, {"pid"}};
    metrics::series s;
    s.label_values = {"1"};
    s.value = 12345;
    f.series = {s};
    snap->families = {f};
    return {snap};
}

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

TEST_CASE("a real Prometheus answers a query with the counter a remote writer pushed",
          "[remote_write]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    prometheus_receiver prom(dir.path(), prom_it::free_port());
    node::remote_writer writer(prom.url(), {.max_backoff = 1s});
    writer.push(node::encode_write_request(counter_snapshot(), now_ms()));
    const auto value = prom.query_until("xtel_rw_test_total", "12345");
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(value == "12345");
    CHECK(writer.sent() == 1);
    CHECK(writer.rejected() == 0);
    CHECK(writer.dropped() == 0);
}

TEST_CASE("bodies pushed while the receiver is down arrive once it is up", "[remote_write]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    const std::uint16_t port = prom_it::free_port();
    node::remote_writer writer(fmt::format("http://127.0.0.1:{}/api/v1/write", port),
                               {.max_backoff = 1s});
    const std::int64_t t = now_ms();
    for (std::int64_t i = 2; i >= 0; --i) {
        writer.push(node::encode_write_request(counter_snapshot(), t - i * 1000));
    }
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (writer.failed_attempts() < 2 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    REQUIRE(writer.failed_attempts() >= 2);
    CHECK(writer.sent() == 0);

    prometheus_receiver prom(dir.path(), port);
    const auto value = prom.query_until("xtel_rw_test_total", "12345");
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(value == "12345");
    const auto sent_by = std::chrono::steady_clock::now() + 20s;
    while (writer.sent() < 3 && std::chrono::steady_clock::now() < sent_by) {
        std::this_thread::sleep_for(10ms);
    }
    CHECK(writer.sent() == 3);
    CHECK(writer.dropped() == 0);
    CHECK(writer.rejected() == 0);
    CHECK(writer.failed_attempts() > 0);
}
