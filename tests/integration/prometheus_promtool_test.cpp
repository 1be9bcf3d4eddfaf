#include <httplib.h>

#include <catch2/catch.hpp>

#include "prometheus_support.hpp"
#include "xtel/exporters/prometheus.hpp"

using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::temp_dir;

namespace {

xtel::event make(xtel::category cat,
                 std::string_view name,
                 std::uint64_t value,
                 xtel::value_kind kind) {
    xtel::event e;
    e.cat = cat;
    e.name = name;
    e.value = value;
    e.kind = kind;
    return e;
}

struct promtool_result {
    int status = -1;
    std::string output;
};

/// Runs `promtool check metrics` on `text`.
promtool_result check_metrics(const temp_dir& dir, std::string_view text) {
    const auto input = dir.path() / "metrics.txt";
    const auto output = dir.path() / "promtool.out";
    prom_it::write_file(input, text);
    child_process promtool(spawn_options{{XTEL_PROMTOOL, "check", "metrics"}, {}, input, output});
    const auto status = promtool.wait(std::chrono::seconds(30));
    return {status.value_or(-1), prom_it::read_file(output)};
}

bool have_promtool() {
    if (std::string_view(XTEL_PROMTOOL).empty()) {
        WARN(
            "SKIPPED: promtool was not found when configuring (Debian package prometheus; "
            "scripts/test installs it)");
        return false;
    }
    return true;
}

}  // namespace

TEST_CASE("promtool check metrics accepts what GET /metrics serves", "[http]") {
    if (!have_promtool()) {
        return;
    }
    xtel::config cfg;
    xtel::prometheus_settings s;
    s.address = {"127.0.0.1", 0};
    s.hostname = "test-host";
    s.max_series = 2;  // so that the overflow series and the folded counter show as well
    xtel::prometheus_exporter a({cfg, "agent \"one\"\\"}, s);
    xtel::prometheus_exporter b({cfg, "agent_two"}, s);
    REQUIRE(a.active());
    REQUIRE(b.active());
    using xtel::category;
    using xtel::value_kind;
    const std::vector<xtel::event> batch = {
        make(category::transfer, "agent_tx_bytes", 1 << 20, value_kind::counter),
        make(category::transfer, "agent_tx_requests_num", 1, value_kind::counter),
        make(category::performance, "agent_xfer_time", 120, value_kind::sample),
        make(category::performance, "agent_xfer_post_time", 4, value_kind::sample),
        make(category::transfer, "agent_rx_bytes", 4096, value_kind::counter),
        make(category::memory, "agent_memory_registered", 1 << 30, value_kind::gauge),
        make(category::system, "telemetry_events_dropped", 3, value_kind::counter),
        make(category::backend, "ucx_retries", 2, value_kind::counter),
        make(category::connection, "peers-connected", 4, value_kind::gauge),
        make(category::custom, "app.queue_wait", 17, value_kind::sample),
    };
    // Transfers for the processor's families: legacy, comprehensive (with an overflow series),
    // time (seconds with decimals), and the folded-updates counter.
    xtel::label_table labels;
    std::vector<xtel::transfer_record> transfers;
    for (const char* peer : {"decode \"7\"", "prefill-0", "prefill-1", "prefill-2"}) {
        xtel::transfer_record r;
        r.bytes = 1 << 20;
        r.requests = 1;
        r.post_us = 3;
        r.xfer_us = 120;
        r.attrs.backend = labels.intern("ucx");
        r.attrs.remote_agent = labels.intern(peer);
        r.attrs.gpu = labels.intern("2x_nvidia_h100");
        transfers.push_back(r);
    }
    transfers.back().dir = xtel::direction::rx;
    transfers.back().attrs.op = xtel::transfer_op::read;
    transfers.back().attrs.status = xtel::transfer_status::error;
    for (auto* e : {&a, &b}) {
        e->export_transfers(transfers, labels);
        e->export_batch(batch);
        e->on_flush_end();
    }
    httplib::Client client("127.0.0.1", a.port());
    const auto res = client.Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);

    const temp_dir dir;
    const auto r = check_metrics(dir, res->body);
    INFO("promtool said:\n" << r.output << "\non:\n" << res->body);
    CHECK(r.status == 0);
    CHECK(r.output.empty());
    CHECK(res->body.find("xtel_transfer_time_seconds_total{") != std::string::npos);
    CHECK(
        res->body.find(
            R"(xtel_metrics_series_folded_total{agent_name="agent_two",hostname="test-host",family="xtel_transfer_bytes_total"} 2)") !=
        std::string::npos);
}

TEST_CASE("promtool check metrics, as the test runs it, rejects a malformed exposition", "[http]") {
    if (!have_promtool()) {
        return;
    }
    const temp_dir dir;
    const auto r =
        check_metrics(dir, "# HELP bytes Bytes.\n# TYPE bytes counter\nbytes{a=\"1\"} 1\n");
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(r.output.find("_total") != std::string::npos);
}
