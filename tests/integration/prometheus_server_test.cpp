#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "prometheus_support.hpp"

namespace prometheus_server_test {

using prom_it::first_value;
using prom_it::percent_encode;
using prom_it::prometheus_server;
using xtel_test::temp_dir;

namespace {

using namespace std::chrono_literals;

/// One exemplar of a /api/v1/query_exemplars answer: its series' le, its request id, value.
struct exemplar_seen {
    std::string le;
    std::string request_id;
    double value = 0;
};

/// The exemplars in a query_exemplars answer (Prometheus's JSON, read by position: each series'
/// labels, then its exemplars).
std::vector<exemplar_seen> exemplars_in(const std::string& json) {
    std::vector<exemplar_seen> out;
    std::size_t at = 0;
    while ((at = json.find("\"seriesLabels\":{", at)) != std::string::npos) {
        const auto labels_end = json.find('}', at);
        const auto le_at = json.find("\"le\":\"", at);
        std::string le;
        if (le_at != std::string::npos && le_at < labels_end) {
            const auto b = le_at + 6;
            le = json.substr(b, json.find('"', b) - b);
        }
        const auto next = json.find("\"seriesLabels\":{", labels_end);
        std::size_t e = labels_end;
        while ((e = json.find("\"request_id\":\"", e)) != std::string::npos && e < next) {
            const auto b = e + 14;
            exemplar_seen x{le, json.substr(b, json.find('"', b) - b), 0};
            const auto v = json.find("\"value\":\"", b);
            if (v != std::string::npos && v < next) {
                x.value = std::stod(json.substr(v + 9, json.find('"', v + 9) - v - 9));
            }
            out.push_back(std::move(x));
            e = b;
        }
        at = labels_end;
    }
    return out;
}

}  // namespace

TEST_CASE("free_port hands out ports below the kernel's ephemeral range, each bindable", "[http]") {
    const int low = prom_it::ephemeral_low();
    REQUIRE(low > prom_it::free_port_floor + 1000);  // Linux's default range starts at 32768
    std::vector<std::uint16_t> seen;
    for (int i = 0; i < 50; ++i) {
        const auto port = prom_it::free_port();
        INFO(port);
        CHECK(port >= prom_it::free_port_floor);
        CHECK(port < low);
        CHECK(prom_it::port_bindable(port));
        seen.push_back(port);
    }
    std::sort(seen.begin(), seen.end());
    // Chosen at random, not the same port again and again.
    CHECK(std::unique(seen.begin(), seen.end()) - seen.begin() > 40);
}

TEST_CASE("a test Prometheus whose port is taken starts on another and answers there", "[http]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("no prometheus binary (XTEL_PROMETHEUS)");
        return;
    }
    // Another server listens on the port first, as another test's might.
    httplib::Server squatter;
    squatter.Get("/api/v1/status/flags", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"status":"success","data":{}})", "application/json");
    });
    const int taken = squatter.bind_to_any_port("127.0.0.1");
    REQUIRE(taken > 0);
    std::thread serving([&] { squatter.listen_after_bind(); });
    // bind_to_any_port has bound and listens: connections queue until the loop takes them.

    const temp_dir dir;
    prometheus_server prom(dir.path(),
                           prom_it::prometheus_options{.port = static_cast<std::uint16_t>(taken),
                                                       .move_if_taken = true});
    INFO(prom_it::read_file(prom.log));
    CHECK(prom.port != taken);
    CHECK_FALSE(prom.server->exited());
    CHECK(prom.value("vector(7)") == "7");
    squatter.stop();
    serving.join();
}

TEST_CASE("a real Prometheus stores the request ids xfer_demo gave as latency exemplars",
          "[http]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    constexpr std::uint64_t transfers = 1000;
    auto w = prom_it::transfer_workload("prom_exemplar_agent", transfers, 65536);
    w.argv.insert(w.argv.end(), {"--request-id-prefix", "kv-"});
    auto target = prom_it::start_workload(w);
    const auto line = target.read_line("serving http://", 20s);
    INFO("workload output:\n" << target.output());
    REQUIRE(line);
    prometheus_server prom(dir.path(), prom_it::served_address(*line),
                           {"--enable-feature=exemplar-storage"});
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const auto path = fmt::format(
        "/api/v1/query_exemplars?query={}&start={}&end={}",
        percent_encode(fmt::format("xtel_transfer_duration_seconds_bucket{{agent_name=\"{}\"}}",
                                   w.agent_name)),
        now - 600, now + 600);
    const auto answer =
        prom.poll(path, [](const std::string& body) { return !exemplars_in(body).empty(); });
    INFO("last answer: " << answer);
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    const auto seen = exemplars_in(answer);
    REQUIRE_FALSE(seen.empty());
    for (const auto& x : seen) {
        INFO(x.request_id << " in le=" << x.le << " value " << x.value);
        // An id xfer_demo gave one of its transfers, in a bucket its value belongs to.
        REQUIRE(x.request_id.starts_with("kv-"));
        CHECK(std::stoull(x.request_id.substr(3)) < transfers);
        CHECK(x.value > 0);
        if (x.le != "+Inf") {
            CHECK(x.value <= std::stod(x.le));
        }
    }
}

TEST_CASE("a real Prometheus server scrapes the transmitted bytes xfer_demo moved", "[http]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN(
            "SKIPPED: prometheus was not found when configuring (Debian package prometheus; "
            "scripts/test installs it)");
        return;
    }
    const temp_dir dir;
    const auto w = prom_it::transfer_workload("prom_it_agent", 1000, 65536);
    auto target = prom_it::start_workload(w);
    const auto line = target.read_line("serving http://", 20s);
    INFO("workload output:\n" << target.output());
    REQUIRE(line);
    const auto address = prom_it::served_address(*line);
    REQUIRE_FALSE(address.empty());
    prometheus_server prom(dir.path(), address);
    const auto query = fmt::format(
        "/api/v1/query?query={}",
        percent_encode(fmt::format("agent_tx_bytes_total{{agent_name=\"{}\"}}", w.agent_name)));
    const auto expected = std::to_string(w.tx_bytes);
    const auto answer =
        prom.poll(query, [&](const std::string& body) { return first_value(body) == expected; });
    const auto value = first_value(answer);
    INFO("last answer: " << answer);
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    CHECK_FALSE(prom.server->exited());
    CHECK(value == expected);
}

TEST_CASE(
    "a real Prometheus scraping with its own default Accept stores every family the text "
    "body serves",
    "[http][surface]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    // Both sets (start_workload's environment): NIXL's gauge agent_xfer_time and counter
    // agent_xfer_time_total are one OpenMetrics family name, the clash this guards.
    const auto w = prom_it::transfer_workload("prom_surface_agent", 200, 65536);
    auto target = prom_it::start_workload(w);
    const auto line = target.read_line("serving http://", 20s);
    INFO("workload output:\n" << target.output());
    REQUIRE(line);
    const auto address = prom_it::served_address(*line);
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    // The sample names of every family the text format shows.
    // Once every transfer is counted, the values stand still (the demo lingers).
    const std::string tx_bytes = std::to_string(w.tx_bytes);
    const std::string text = prom_it::scrape_until(port, [&](const std::string& b) {
        return prom_it::value_of(b, "agent_tx_bytes_total{agent_name=\"prom_surface_agent\"") ==
               tx_bytes;
    });
    const auto xfer_time =
        prom_it::value_of(text, "agent_xfer_time_total{agent_name=\"prom_surface_agent\"");
    REQUIRE(xfer_time);
    std::vector<std::string> names;
    std::size_t pos = 0;
    while ((pos = text.find("# TYPE ", pos)) != std::string::npos) {
        const auto end = text.find('\n', pos);
        const std::string type_line = text.substr(pos + 7, end - pos - 7);
        const std::string name = type_line.substr(0, type_line.find(' '));
        const std::string type = type_line.substr(type_line.find(' ') + 1);
        if (type == "histogram") {
            names.push_back(name + "_bucket");
            names.push_back(name + "_count");
        } else {
            names.push_back(name);
        }
        pos = end;
    }
    REQUIRE(names.size() > 40);
    REQUIRE(std::find(names.begin(), names.end(), "agent_xfer_time_total") != names.end());
    // Prometheus's own scrape Accept prefers OpenMetrics; nothing here asks otherwise.
    prometheus_server prom(dir.path(), address);
    const auto query =
        "/api/v1/query?query=" + percent_encode("count by (__name__) ({job=\"xtel\"})");
    const auto has_all = [&](const std::string& body) {
        return std::all_of(names.begin(), names.end(), [&](const std::string& n) {
            return body.find("\"__name__\":\"" + n + "\"") != std::string::npos;
        });
    };
    const auto answer = prom.poll(query, has_all);
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    for (const auto& n : names) {
        INFO(n);
        CHECK(answer.find("\"__name__\":\"" + n + "\"") != std::string::npos);
    }
    // It was OpenMetrics: the counter that shares its family name with a gauge was typed unknown
    // there (the text format says counter), and still has its data under its own name.
    const auto metadata =
        prom.poll("/api/v1/metadata?metric=agent_xfer_time_total",
                  [](const std::string& b) { return b.find("\"type\"") != std::string::npos; });
    CHECK(metadata.find("\"type\":\"unknown\"") != std::string::npos);
    CHECK(prom.value_until("agent_xfer_time_total{agent_name=\"prom_surface_agent\"}",
                           *xfer_time) == *xfer_time);
}

}  // namespace prometheus_server_test
