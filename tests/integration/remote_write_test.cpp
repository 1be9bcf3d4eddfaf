// The remote-write client against a real Prometheus with its receiver on: what it pushes is
// queryable, native histograms included, and bodies pushed while the receiver is down arrive
// once it is up.

#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "native_snapshot.hpp"
#include "prometheus_receiver.hpp"
#include "prometheus_support.hpp"
#include "xtel/push/remote_write.hpp"

namespace remote_write_test {

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

/// One bucket of a native histogram as the query API shows it: [boundaries, lower, upper,
/// count], the bounds and the count read as numbers.
struct shown_bucket {
    int boundaries = 0;
    double lower = 0;
    double upper = 0;
    std::uint64_t count = 0;
};

/// The native histogram in an instant query's answer: its "count", its "sum" (as written) and
/// its buckets; empty when the answer has none.
struct shown_histogram {
    std::string count;
    std::string sum;
    std::vector<shown_bucket> buckets;
};

/// The quoted text after `key` at or past `from` in `json`, and where it ends.
std::pair<std::string, std::size_t> quoted_after(const std::string& json,
                                                 std::string_view key,
                                                 std::size_t from) {
    const auto at = json.find(key, from);
    if (at == std::string::npos) {
        return {{}, std::string::npos};
    }
    const auto open = json.find('"', at + key.size());
    const auto close = json.find('"', open + 1);
    return {json.substr(open + 1, close - open - 1), close + 1};
}

shown_histogram histogram_of(const std::string& json) {
    shown_histogram out;
    const auto at = json.find("\"histogram\":[");
    if (at == std::string::npos) {
        return out;
    }
    std::size_t pos = 0;
    std::tie(out.count, pos) = quoted_after(json, "\"count\":", at);
    std::tie(out.sum, pos) = quoted_after(json, "\"sum\":", pos);
    const auto list = json.find("\"buckets\":[", pos);
    if (list == std::string::npos) {
        return out;
    }
    // Each bucket is [N,"lower","upper","count"]; the list ends at "]]".
    const auto end = json.find("]]", list);
    for (auto open = json.find('[', list + 11); open != std::string::npos && open < end;
         open = json.find('[', open + 1)) {
        shown_bucket b;
        b.boundaries = std::atoi(json.c_str() + open + 1);
        std::string text;
        std::tie(text, pos) = quoted_after(json, ",", open);
        b.lower = std::strtod(text.c_str(), nullptr);
        std::tie(text, pos) = quoted_after(json, ",", pos);
        b.upper = std::strtod(text.c_str(), nullptr);
        std::tie(text, pos) = quoted_after(json, ",", pos);
        b.count = std::stoull(text);
        out.buckets.push_back(b);
    }
    return out;
}

/// Whether `a` is `b` but for the last bits: Prometheus computes a bucket's bounds its own way.
bool near(double a, double b) {
    return std::abs(a - b) <= 1e-14 * std::abs(b);
}

}  // namespace

TEST_CASE("a real Prometheus stores the native histogram a remote writer pushed, bucket for bucket",
          "[remote_write]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    prometheus_receiver prom(dir.path(), prom_it::free_port(),
                             {"--enable-feature=native-histograms"});
    const auto store = xtel_test::native_store("xtel_rw_native_seconds");
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store)};
    push::remote_writer writer(prom.url(), {.max_backoff = 1s});
    writer.push(push::encode_write_request(snaps, now_ms()));
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(prom.query_until("histogram_count(xtel_rw_native_seconds)", "6") == "6");
    CHECK(prom.query_until("histogram_sum(xtel_rw_native_seconds)", "3.00291") == "3.00291");
    const std::string body = prom.query_body_until(
        "xtel_rw_native_seconds{agent_name=\"a\",op=\"write\"}",
        [](const std::string& b) { return b.find("\"histogram\"") != std::string::npos; });
    INFO("query answer: " << body);
    const shown_histogram h = histogram_of(body);
    CHECK(h.count == "6");
    CHECK(h.sum == "3.00291");
    // The zero bucket [-2^-128, 2^-128] (closed: 3), then buckets -88, -79 and 13 of schema 3,
    // (2^((i-1)/8), 2^(i/8)] (open below, closed above: 0).
    REQUIRE(h.buckets.size() == 4);
    CHECK(h.buckets[0].boundaries == 3);
    CHECK(h.buckets[0].lower == -std::ldexp(1.0, -128));
    CHECK(h.buckets[0].upper == std::ldexp(1.0, -128));
    CHECK(h.buckets[0].count == 1);
    const std::pair<std::int32_t, std::uint64_t> expected[] = {{-88, 2}, {-79, 2}, {13, 1}};
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& b = h.buckets[i + 1];
        const auto [index, count] = expected[i];
        INFO("bucket " << index);
        CHECK(b.boundaries == 0);
        CHECK(near(b.lower, std::exp2((index - 1) / 8.0)));
        CHECK(near(b.upper, std::exp2(index / 8.0)));
        CHECK(b.count == count);
    }
    CHECK(writer.rejected() == 0);
}

TEST_CASE("a real Prometheus stores both forms of a histogram under names that do not collide",
          "[remote_write]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    prometheus_receiver prom(dir.path(), prom_it::free_port(),
                             {"--enable-feature=native-histograms"});
    const auto store = xtel_test::native_store("xtel_rw_both_seconds", {500, 2000});
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store)};
    push::remote_writer writer(prom.url(), {.max_backoff = 1s});
    writer.push(push::encode_write_request(snaps, now_ms()));
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(prom.query_until("histogram_count(xtel_rw_both_seconds)", "6") == "6");
    CHECK(prom.query_until("histogram_sum(xtel_rw_both_seconds)", "3.00291") == "3.00291");
    CHECK(prom.query_until("xtel_rw_both_seconds_bucket{le=\"0.0005\"}", "3") == "3");
    CHECK(prom.query_until("xtel_rw_both_seconds_bucket{le=\"0.002\"}", "5") == "5");
    CHECK(prom.query_until("xtel_rw_both_seconds_bucket{le=\"+Inf\"}", "6") == "6");
    CHECK(prom.query_until("xtel_rw_both_seconds_count", "6") == "6");
    CHECK(prom.query_until("xtel_rw_both_seconds_sum", "3.00291") == "3.00291");
    CHECK(writer.rejected() == 0);
}

TEST_CASE("a Prometheus without native histograms refuses a push with one, and it is retried",
          "[remote_write]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    // What docs/deployment.md warns of: the whole push is refused (500), not only the native
    // series, so the feature must be on before native histograms are.
    const temp_dir dir;
    prometheus_receiver prom(dir.path(), prom_it::free_port());
    const auto store = xtel_test::native_store("xtel_rw_native_seconds");
    const std::vector<std::shared_ptr<const metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store)};
    push::remote_writer writer(prom.url(), {.max_backoff = 1s});
    writer.push(push::encode_write_request(snaps, now_ms()));
    // Until Prometheus has refused it (the first attempts may find it not listening yet).
    const auto refused = [&] {
        return prom_it::read_file(prom.log).find("native histograms are disabled") !=
               std::string::npos;
    };
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!refused() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(500ms);  // past the answer, into the backoff
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK(refused());
    CHECK(writer.failed_attempts() >= 1);
    CHECK(writer.sent() == 0);
    CHECK(writer.rejected() == 0);
}

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

}  // namespace remote_write_test
