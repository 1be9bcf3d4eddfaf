#include <httplib.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "prometheus_support.hpp"

using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::temp_dir;

namespace {

using namespace std::chrono_literals;

/// The sample value of the first series in a /api/v1/query answer; empty when there is none.
std::string first_value(const std::string& json) {
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

std::string percent_encode(std::string_view s) {
    std::string out;
    for (const unsigned char c : s) {
        if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

}  // namespace

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

    prom_it::write_file(dir.path() / "prometheus.yml", fmt::format("global:\n"
                                                                   "  scrape_interval: 1s\n"
                                                                   "  scrape_timeout: 1s\n"
                                                                   "scrape_configs:\n"
                                                                   "  - job_name: xtel\n"
                                                                   "    static_configs:\n"
                                                                   "      - targets: ['{}']\n",
                                                                   address));
    const auto port = prom_it::free_port();
    REQUIRE(port != 0);
    child_process server(
        spawn_options{{XTEL_PROMETHEUS, "--config.file=" + (dir.path() / "prometheus.yml").string(),
                       "--storage.tsdb.path=" + (dir.path() / "data").string(),
                       fmt::format("--web.listen-address=127.0.0.1:{}", port), "--log.level=warn"},
                      {},
                      {},
                      dir.path() / "prometheus.log"});

    httplib::Client api("127.0.0.1", port);
    api.set_connection_timeout(1);
    api.set_read_timeout(5);
    const auto query = fmt::format(
        "/api/v1/query?query={}",
        percent_encode(fmt::format("agent_tx_bytes_total{{agent_name=\"{}\"}}", w.agent_name)));
    const auto expected = std::to_string(w.tx_bytes);
    std::string last_answer;
    std::string value;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (value != expected && std::chrono::steady_clock::now() < deadline && !server.exited()) {
        if (const auto res = api.Get(query); res && res->status == 200) {
            last_answer = res->body;
            value = first_value(res->body);
        }
        if (value != expected) {
            std::this_thread::sleep_for(250ms);
        }
    }
    INFO("last answer: " << last_answer);
    INFO("prometheus log:\n" << prom_it::read_file(dir.path() / "prometheus.log"));
    CHECK_FALSE(server.exited());
    CHECK(value == expected);
}
