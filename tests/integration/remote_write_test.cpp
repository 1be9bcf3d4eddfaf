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

#include "prometheus_receiver.hpp"
#include "prometheus_support.hpp"
#include "xtel/push/remote_write.hpp"

using prom_it::prometheus_receiver;
using xtel_test::temp_dir;
using namespace std::chrono_literals;
using namespace xtel;

namespace {

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
    push::remote_writer writer(prom.url(), {.max_backoff = 1s});
    writer.push(push::encode_write_request(counter_snapshot(), now_ms()));
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
    push::remote_writer writer(fmt::format("http://127.0.0.1:{}/api/v1/write", port),
                               {.max_backoff = 1s});
    const std::int64_t t = now_ms();
    for (std::int64_t i = 2; i >= 0; --i) {
        writer.push(push::encode_write_request(counter_snapshot(), t - i * 1000));
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
