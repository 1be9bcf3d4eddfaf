// The Prometheus exporter's transfer series, made by the metrics processor: which builders run,
// exact values, the series limit, run-time builders, and the variables that configure them.

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prometheus_fixtures.hpp"
#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/metrics/builder.hpp"

namespace metrics_prometheus_test {

using prom_test::exporter_under_test;
using prom_test::transfer_round;

namespace {

bool has_line(const std::string& text, std::string_view line) {
    return text.find("\n" + std::string(line) + "\n") != std::string::npos;
}

/// Every line of `text` that starts with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, std::string_view prefix) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto end = text.find('\n', pos);
        const auto line = text.substr(pos, end - pos);
        if (line.starts_with(prefix)) {
            out.push_back(line);
        }
        pos = end == std::string::npos ? text.size() : end + 1;
    }
    return out;
}

/// An exporter configured with `builders` and `max_series`.
struct configured {
    configured(std::vector<std::string> builders, std::size_t max_series = 1000)
        : metrics(std::make_shared<xtel::metrics::agent_metrics>(
              "a1", model(std::move(builders), max_series))),
          exporter({{cfg, "a1"}, metrics}, exporter_under_test::settings("127.0.0.1:0")) {}

    static xtel::metrics::agent_metrics_settings model(std::vector<std::string> builders,
                                                       std::size_t max_series) {
        auto s = exporter_under_test::model({10, 100});
        s.builders = std::move(builders);
        s.max_series = max_series;
        return s;
    }

    /// A transfer to or from `peer`, with the attributes the agent gives it.
    transfer_round to(std::string_view peer,
                      xtel::transfer_op op,
                      std::uint64_t bytes,
                      std::uint64_t post_us,
                      std::uint64_t xfer_us,
                      xtel::transfer_status st = xtel::transfer_status::success) {
        auto r = prom_test::transfer(
            op == xtel::transfer_op::write ? xtel::direction::tx : xtel::direction::rx, bytes, 1,
            post_us, xfer_us);
        auto& a = r.transfers[0].attrs;
        a.backend = labels.intern("ucx");
        a.remote_agent = labels.intern(peer);
        a.gpu = labels.intern("2x_nvidia_h100");
        a.op = op;
        a.status = st;
        return r;
    }

    /// Folds the rounds and publishes them, as the back end does.
    void flush(const std::vector<transfer_round>& rounds) {
        for (const auto& r : rounds) {
            metrics->apply_transfers(r.transfers, labels);
            metrics->apply(r.events);
        }
        metrics->publish();
    }

    xtel::config cfg;
    xtel::label_table labels;
    std::shared_ptr<xtel::metrics::agent_metrics> metrics;
    xtel::prometheus_exporter exporter;
};

/// The labels every series of the xtel set starts with; the NIXL set's add hostname.
constexpr std::string_view agent = R"(agent_name="a1")";
constexpr std::string_view nixl_agent = R"(agent_name="a1",hostname="h")";

std::string series(std::string_view family, std::string_view labels, std::string_view value) {
    return fmt::format("{}{{{},{}}} {}", family, agent, labels, value);
}

template <class F>
std::string config_error_of(F&& f) {
    try {
        f();
    } catch (const xtel::config_error& e) {
        return e.what();
    }
    return {};
}

class failures_by_peer : public xtel::metrics::builder {
  public:
    void setup(xtel::metrics::metric_store& store,
               const xtel::metrics::attribute_registry&) override {
        family_ = store.add_family({"user_failed_transfers_total",
                                    "Failed transfers by peer.",
                                    xtel::metrics::metric_type::counter,
                                    {"peer"}});
    }
    void build(const xtel::metrics::transfer_group& g,
               xtel::metrics::metric_store& store) override {
        if (g.attrs.status == xtel::transfer_status::error) {
            store.add(family_, {g.data.find("remote_agent")->label}, g.totals.transfers);
        }
    }

  private:
    xtel::metrics::family_id family_ = 0;
};

/// A builder whose one family is given by the test.
class one_family : public xtel::metrics::builder {
  public:
    explicit one_family(xtel::metrics::family_spec spec) : spec_(std::move(spec)) {}
    void setup(xtel::metrics::metric_store& store,
               const xtel::metrics::attribute_registry&) override {
        store.add_family(spec_);
    }
    void build(const xtel::metrics::transfer_group&, xtel::metrics::metric_store&) override {}

  private:
    xtel::metrics::family_spec spec_;
};

}  // namespace

TEST_CASE("comprehensive series carry every attribute as a label, with exact bytes") {
    configured t({"comprehensive"});
    t.flush({t.to("Decode-1", xtel::transfer_op::write, 4096, 2, 30),
             t.to("Decode-1", xtel::transfer_op::write, 1000, 2, 30),
             t.to("Decode-1", xtel::transfer_op::read, 65536, 3, 40)});
    const auto text = t.exporter.scrape();
    CHECK(
        lines_starting(text, "xtel_transfer_bytes_total{") ==
        std::vector<std::string>{
            series(
                "xtel_transfer_bytes_total",
                R"(backend="ucx",operation="write",direction="tx",local_memory="dram",remote_memory="dram",remote_agent="Decode-1",status="success",gpu="2x_nvidia_h100")",
                "5096"),
            series(
                "xtel_transfer_bytes_total",
                R"(backend="ucx",operation="read",direction="rx",local_memory="dram",remote_memory="dram",remote_agent="Decode-1",status="success",gpu="2x_nvidia_h100")",
                "65536")});
    CHECK(has_line(
        text,
        series(
            "xtel_transfer_requests_total",
            R"(backend="ucx",operation="write",direction="tx",local_memory="dram",remote_memory="dram",remote_agent="Decode-1",status="success",gpu="2x_nvidia_h100")",
            "2")));
    CHECK(text.find("# TYPE xtel_transfer_bytes_total counter\n") != std::string::npos);
    CHECK(text.find("agent_tx_bytes_total") == std::string::npos);
    CHECK(text.find("xtel_transfer_time_seconds_total{") == std::string::npos);
}

TEST_CASE("time series show seconds, summed exactly from microseconds") {
    configured t({"time"});
    t.flush({t.to("p", xtel::transfer_op::write, 1, 7, 450),
             t.to("p", xtel::transfer_op::write, 1, 5, 1000000)});
    const auto text = t.exporter.scrape();
    const std::string_view labels =
        R"(backend="ucx",operation="write",direction="tx",local_memory="dram",remote_memory="dram",remote_agent="p",status="success",gpu="2x_nvidia_h100")";
    CHECK(has_line(text, series("xtel_transfer_time_seconds_total", labels, "1.000450")));
    CHECK(has_line(text, series("xtel_transfer_post_time_seconds_total", labels, "0.000012")));
}

TEST_CASE("legacy counters come from transfer records only, so totals are exact, not doubled") {
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {"prometheus"};
    xtel::prometheus_telemetry t(cfg, "exact", {.start_flusher = false});
    for (int i = 0; i < 250; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 4096, 2, 1, 1);
        t.record_transfer(xtel::direction::rx, 1, 100, 1, 1, 1);
    }
    t.flush();
    // Hand-recorded events of the legacy names are passed over as well, not added.
    t.add(xtel::category::transfer, xtel::names::agent_tx_bytes, 999);
    t.flush();
    const auto text = t.get<xtel::prometheus_exporter>().scrape();
    CHECK(lines_starting(text, "agent_tx_bytes_total{")[0].ends_with("} 1024000"));
    CHECK(lines_starting(text, "agent_tx_requests_num_total{")[0].ends_with("} 500"));
    CHECK(lines_starting(text, "agent_rx_bytes_total{")[0].ends_with("} 25000"));
    CHECK(lines_starting(text, "agent_rx_requests_num_total{")[0].ends_with("} 250"));
    CHECK(lines_starting(text, "xtel_transfer_bytes_total{")[0].ends_with("} 1024000"));
    CHECK(lines_starting(text, "xtel_telemetry_events_unmapped_total{")[0].ends_with("} 0"));
    // The histograms come from the same records: one observation per completed, timed transfer.
    CHECK(lines_starting(text, "agent_xfer_time_us_count{")[0].ends_with("} 500"));
}

TEST_CASE("a failed transfer shows under status error and stays out of the legacy counters") {
    configured t({"legacy", "comprehensive"});
    t.flush({t.to("d", xtel::transfer_op::write, 4096, 1, 1),
             t.to("d", xtel::transfer_op::write, 512, 1, 9, xtel::transfer_status::error)});
    const auto text = t.exporter.scrape();
    CHECK(
        has_line(text, std::string("agent_tx_bytes_total{") + std::string(nixl_agent) + "} 4096"));
    CHECK(has_line(
        text,
        series(
            "xtel_transfer_bytes_total",
            R"(backend="ucx",operation="write",direction="tx",local_memory="dram",remote_memory="dram",remote_agent="d",status="error",gpu="2x_nvidia_h100")",
            "512")));
}

TEST_CASE("past the series limit peers fold into 'other' and the folded counter says how many") {
    configured t({"comprehensive"}, 2);
    std::vector<transfer_round> rounds;
    for (const auto* peer : {"p1", "p2", "p3", "p4", "p5"}) {
        rounds.push_back(t.to(peer, xtel::transfer_op::write, 10, 1, 1));
    }
    t.flush(rounds);
    const auto text = t.exporter.scrape();
    CHECK(lines_starting(text, "xtel_transfer_bytes_total{").size() == 3);
    CHECK(has_line(
        text,
        series(
            "xtel_transfer_bytes_total",
            R"(backend="other",operation="other",direction="other",local_memory="other",remote_memory="other",remote_agent="other",status="other",gpu="other")",
            "30")));
    CHECK(has_line(text, series("xtel_metrics_series_folded_total",
                                R"(family="xtel_transfer_bytes_total")", "3")));
    CHECK(has_line(text, series("xtel_metrics_series_folded_total",
                                R"(family="xtel_transfer_requests_total")", "3")));
}

TEST_CASE("with no builders there are no transfer series, and the histograms remain") {
    configured t({});
    t.flush({t.to("p", xtel::transfer_op::write, 10, 1, 1)});
    const auto text = t.exporter.scrape();
    CHECK(text.find("agent_tx_bytes_total") == std::string::npos);
    CHECK(text.find("xtel_transfer_bytes_total") == std::string::npos);
    CHECK(text.find("xtel_transfer_time_seconds_total") == std::string::npos);
    CHECK(text.find(R"(family="xtel_transfer_bytes_total")") == std::string::npos);
    CHECK(lines_starting(text, "agent_xfer_time_us_count{")[0].ends_with("} 1"));
    CHECK(lines_starting(text, "xtel_transfer_duration_seconds_count{")[0].ends_with("} 1"));
}

TEST_CASE("a builder added to the exporter at run time is served beside the others") {
    configured t({"legacy"});
    t.exporter.model().add_builder(std::make_unique<failures_by_peer>());
    t.flush({t.to("decode-7", xtel::transfer_op::write, 1, 1, 1, xtel::transfer_status::error),
             t.to("decode-7", xtel::transfer_op::read, 1, 1, 1, xtel::transfer_status::error),
             t.to("decode-8", xtel::transfer_op::write, 1, 1, 1)});
    const auto text = t.exporter.scrape();
    CHECK(
        lines_starting(text, "user_failed_transfers_total{") ==
        std::vector<std::string>{series("user_failed_transfers_total", R"(peer="decode-7")", "2")});
    CHECK(text.find("# HELP user_failed_transfers_total Failed transfers by peer.\n") !=
          std::string::npos);
}

TEST_CASE("a run-time builder may not take a name or a label the exporter uses") {
    configured t({"legacy", "comprehensive"});
    using xtel::metrics::metric_type;
    CHECK_THROWS_WITH(
        t.exporter.model().add_builder(std::make_unique<one_family>(xtel::metrics::family_spec{
            "agent_memory_registered_total", "h", metric_type::counter, {}})),
        Catch::Contains("'agent_memory_registered_total' is refused: agent 'a1' already serves"));
    CHECK_THROWS_WITH(
        t.exporter.model().add_builder(std::make_unique<one_family>(
            xtel::metrics::family_spec{"agent_xfer_time_us_count", "h", metric_type::gauge, {}})),
        Catch::Contains("'agent_xfer_time_us_count' is refused"));
    CHECK_THROWS_WITH(
        t.exporter.model().add_builder(std::make_unique<one_family>(xtel::metrics::family_spec{
            "xtel_transfer_bytes_total", "h", metric_type::counter, {"peer"}})),
        Catch::Contains("already defined"));
    CHECK_THROWS_WITH(
        t.exporter.model().add_builder(std::make_unique<one_family>(
            xtel::metrics::family_spec{"mine_total", "h", metric_type::counter, {"agent_name"}})),
        Catch::Contains("label 'agent_name' of metric family 'mine_total' is reserved"));
    // An event family cannot take a processor family's name afterwards either.
    t.flush({});
    t.metrics->apply(std::vector{prom_test::make(
        xtel::category::custom, "xtel_transfer_bytes_total", 1, xtel::value_kind::counter)});
    t.metrics->publish();
    CHECK(lines_starting(t.exporter.scrape(), "xtel_telemetry_events_unmapped_total{")[0].ends_with(
        "} 1"));
}

TEST_CASE("the Prometheus builders and series limit are read from their variables") {
    using xtel::metrics::agent_metrics_settings;
    const auto defaults = agent_metrics_settings::from_env(xtel_test::env_table({}));
    // Unset: those of the family sets served (the xtel set's comprehensive by default).
    CHECK_FALSE(defaults.builders.has_value());
    CHECK(agent_metrics_settings::default_builders(defaults.sets) ==
          std::vector<std::string>{"comprehensive"});
    CHECK(agent_metrics_settings::default_builders(xtel::metrics::family_sets::both) ==
          std::vector<std::string>{"legacy", "comprehensive"});
    CHECK(defaults.max_series == 1000);
    const auto s = agent_metrics_settings::from_env(
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_BUILDERS", " time , legacy"},
                              {"NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES", "25"}}));
    CHECK(s.builders == std::vector<std::string>{"time", "legacy"});
    CHECK(s.max_series == 25);
    CHECK(agent_metrics_settings::from_env(
              xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_BUILDERS", "none"}}))
              .builders->empty());
}

TEST_CASE("a malformed builder list is a config_error naming the variable, value and names") {
    for (const char* bad :
         {"", "legacy,", "legacy,,time", "Legacy", "legacy,legacy", "fancy", "none,legacy"}) {
        INFO(bad);
        const auto message = config_error_of([&] {
            xtel::metrics::agent_metrics_settings::from_env(
                xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_BUILDERS", bad}}));
        });
        CHECK_THAT(message, Catch::StartsWith(fmt::format(
                                "NIXL_TELEMETRY_PROMETHEUS_BUILDERS='{}' is invalid", bad)));
        CHECK_THAT(message, Catch::Contains("from legacy, comprehensive, time"));
    }
}

TEST_CASE("a series limit that is not a whole number from 1 to 1000000 is a config_error") {
    for (const char* bad : {"0", "-1", "1e3", "1000001", "", "10 "}) {
        INFO(bad);
        CHECK_THAT(
            config_error_of([&] {
                xtel::metrics::agent_metrics_settings::from_env(
                    xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES", bad}}));
            }),
            Catch::StartsWith(fmt::format("NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES='{}' is "
                                          "invalid: expected a whole number from 1 to 1000000",
                                          bad)));
    }
}

TEST_CASE(
    "a builder added while the flusher runs sees the transfers after it, and totals stay exact",
    "[concurrency]") {
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {"prometheus"};
    cfg.run_interval = std::chrono::milliseconds(1);
    xtel::prometheus_telemetry t(cfg, "live", {.staging_capacity = 1 << 16});
    auto& e = t.get<xtel::prometheus_exporter>();
    xtel::transfer_attributes failed;
    failed.remote_agent = t.labels().intern("peer");
    failed.status = xtel::transfer_status::error;
    for (int i = 0; i < 20000; ++i) {
        if (i == 10000) {
            t.metric_state().add_builder(std::make_unique<failures_by_peer>());
        }
        t.record_transfer(xtel::direction::tx, 1, 10, 1, 1, 1);
        t.record_transfer(xtel::direction::tx, 1, 10, 1, 1, 1, failed);
        (void)e.scrape();
    }
    t.flush();
    const auto text = e.scrape();
    CHECK(lines_starting(text, "agent_tx_bytes_total{")[0].ends_with("} 200000"));
    const auto failures = lines_starting(text, "user_failed_transfers_total{");
    REQUIRE(failures.size() == 1);
    const auto counted = std::stoull(failures[0].substr(failures[0].rfind(' ') + 1));
    CHECK(counted >= 10000);
    CHECK(counted <= 20000);
    CHECK(t.stats().records_dropped == 0);
}

TEST_CASE("peer names reach the label values as written and are never merged") {
    configured t({"comprehensive"});
    t.flush({t.to("decode-7", xtel::transfer_op::write, 100, 1, 1),
             t.to("decode_7", xtel::transfer_op::write, 20, 1, 1),
             t.to("Décode \"7\"\\n", xtel::transfer_op::write, 3, 1, 1)});
    const auto text = t.exporter.scrape();
    INFO(text);
    const auto with_peer = [](std::string_view peer) {
        return fmt::format(
            R"(backend="ucx",operation="write",direction="tx",local_memory="dram",remote_memory="dram",remote_agent="{}",status="success",gpu="2x_nvidia_h100")",
            peer);
    };
    CHECK(has_line(text, series("xtel_transfer_bytes_total", with_peer("decode-7"), "100")));
    CHECK(has_line(text, series("xtel_transfer_bytes_total", with_peer("decode_7"), "20")));
    // The exposition format's escapes only: \" for the quote, \\ for the backslash.
    CHECK(
        has_line(text, series("xtel_transfer_bytes_total", with_peer(R"(Décode \"7\"\\n)"), "3")));
    CHECK(lines_starting(text, "xtel_transfer_bytes_total{").size() == 3);
}

}  // namespace metrics_prometheus_test

namespace metrics_prometheus_test {

namespace {

/// The exemplars' request ids of family `name`'s series whose label values include `value`.
std::vector<std::string> exemplar_ids(const xtel::metrics::snapshot& snap,
                                      std::string_view name,
                                      std::string_view value) {
    for (const auto& f : snap.families) {
        if (f.spec.name != name) {
            continue;
        }
        for (const auto& s : f.series) {
            if (std::find(s.label_values.begin(), s.label_values.end(), value) ==
                s.label_values.end()) {
                continue;
            }
            std::vector<std::string> ids;
            for (const auto& e : s.exemplars) {
                ids.push_back(e.label_value);
            }
            return ids;
        }
    }
    return {"no such series"};
}

}  // namespace

TEST_CASE("each latency bucket keeps the exemplar of the round's last tagged transfer in it") {
    configured c({"comprehensive"});
    // Bounds 10 and 100 µs: a, b and the untagged one fall in the first bucket, c in the second.
    std::vector<transfer_round> rounds{c.to("p1", xtel::transfer_op::write, 4096, 1, 5),
                                       c.to("p1", xtel::transfer_op::write, 4096, 1, 7),
                                       c.to("p1", xtel::transfer_op::write, 4096, 1, 50),
                                       c.to("p1", xtel::transfer_op::write, 4096, 1, 6)};
    transfer_round round;
    const char* ids[] = {"a", "b", "c", ""};
    for (std::size_t i = 0; i < rounds.size(); ++i) {
        xtel::transfer_record r = rounds[i].transfers[0];
        r.request_id = ids[i];
        r.timestamp_us = 10 + i;
        round.transfers.push_back(r);
    }
    // b's trace and span, as the span stage hands them on.
    const xtel::transfer_trace b{.index = 1, .trace_id = {1, 2, 3}, .span_id = {4, 5}};
    c.metrics->apply_transfers(round.transfers, c.labels, std::span(&b, 1));
    c.metrics->publish();
    const auto snap = c.metrics->latest();
    REQUIRE(snap != nullptr);

    // One bucket per bound and +Inf: b (not a, nor the untagged one after it), c, none.
    const std::vector<std::string> want{"b", "c", ""};
    CHECK(exemplar_ids(*snap, "xtel_transfer_duration_seconds", "p1") == want);
    for (const auto& f : snap->families) {
        if (f.spec.name == "xtel_transfer_duration_seconds") {
            const auto& e = f.series.at(0).exemplars.at(0);
            CHECK(e.value == 7);
            CHECK(e.timestamp_us == 11);
            CHECK(e.trace_id[2] == 3);
            CHECK(e.span_id[1] == 5);
            CHECK(f.series.at(0).exemplars.at(1).trace_id == std::array<std::uint8_t, 16>{});
        }
    }
}

}  // namespace metrics_prometheus_test

namespace metrics_prometheus_test {

TEST_CASE("with peers interleaved each peer's bucket keeps its own last tagged transfer") {
    configured c({"comprehensive"});
    // All in the first bucket (bound 10 µs): p1's last is c, p2's is d; the histogram of all
    // transfers keeps d, the round's last. a and b, each a run's earlier block, keep nothing.
    const std::string_view peer[] = {"p1", "p1", "p2", "p2", "p1", "p2"};
    const char* ids[] = {"a", "a", "b", "b2", "c", "d"};
    transfer_round round;
    for (std::size_t i = 0; i < 6; ++i) {
        xtel::transfer_record r = c.to(peer[i], xtel::transfer_op::write, 4096, 1, 3).transfers[0];
        r.request_id = ids[i];
        round.transfers.push_back(r);
    }
    c.metrics->apply_transfers(round.transfers, c.labels);
    c.metrics->publish();
    const auto snap = c.metrics->latest();
    REQUIRE(snap != nullptr);
    CHECK(exemplar_ids(*snap, "xtel_transfer_duration_seconds", "p1") ==
          std::vector<std::string>{"c", "", ""});
    CHECK(exemplar_ids(*snap, "xtel_transfer_duration_seconds", "p2") ==
          std::vector<std::string>{"d", "", ""});
    CHECK(exemplar_ids(*snap, "agent_xfer_time_us", "h") == std::vector<std::string>{"d", "", ""});
}

namespace {

/// A model with classic histograms, which tallies a round's latencies, beside one with native
/// buckets too, which observes them one by one: fed the same rounds, each pair of their series
/// (same family, same index) handed to a check once both are published.
struct tallied_beside_each {
    configured c{{"comprehensive"}};
    xtel::metrics::agent_metrics tallied{"a1", configured::model({"comprehensive"}, 1000)};
    xtel::metrics::agent_metrics each{"a1",
                                      with_native(configured::model({"comprehensive"}, 1000))};

    static xtel::metrics::agent_metrics_settings with_native(
        xtel::metrics::agent_metrics_settings s) {
        s.histograms = xtel::metrics::histogram_kind::both;
        return s;
    }

    void apply(const std::vector<xtel::transfer_record>& round,
               std::span<const xtel::transfer_trace> traces = {}) {
        tallied.apply_transfers(round, c.labels, traces);
        each.apply_transfers(round, c.labels, traces);
    }

    /// `check(family, tallied's series, each's series)` for every series of every family.
    template <class Check>
    void compare(Check check) {
        tallied.publish();
        each.publish();
        for (const auto& f : tallied.latest()->families) {
            const auto other =
                std::find_if(each.latest()->families.begin(), each.latest()->families.end(),
                             [&](const auto& g) { return g.spec.name == f.spec.name; });
            REQUIRE(other != each.latest()->families.end());
            REQUIRE(f.series.size() == other->series.size());
            for (std::size_t s = 0; s < f.series.size(); ++s) {
                INFO(f.spec.name << " series " << s);
                check(f, f.series[s], other->series[s]);
            }
        }
    }
};

}  // namespace

TEST_CASE("a round's latencies between peers count as each observed alone would, classic or both") {
    // Classic histograms take the round's transfers bucketed first and added at its end; with
    // native buckets too each value is observed in turn. Their classic buckets, sums and
    // counts must agree, for interleaved peers and operations, across two rounds.
    tallied_beside_each m;
    const std::string_view peers[] = {"p1", "p2", "p1", "p3"};
    std::vector<xtel::transfer_record> round;
    for (std::uint64_t i = 0; i < 40; ++i) {
        const auto op = i % 3 == 0 ? xtel::transfer_op::read : xtel::transfer_op::write;
        round.push_back(m.c.to(peers[i % 4], op, 100 + i, i * 7 % 150, i * 13 % 300).transfers[0]);
    }
    round[5].timed = false;  // counted, not observed
    for (int pass = 0; pass < 2; ++pass) {
        m.apply(round);
    }
    std::size_t compared = 0;
    m.compare([&](const auto& family, const auto& mine, const auto& theirs) {
        if (family.spec.type != xtel::metrics::metric_type::histogram) {
            return;
        }
        CHECK(mine.label_values == theirs.label_values);
        CHECK(mine.buckets == theirs.buckets);
        CHECK(mine.sum == theirs.sum);
        CHECK(mine.count == theirs.count);
        compared += mine.count;
    });
    // The two histograms of all transfers and the two of each {op, peer}: four observations
    // of each of the 39 timed transfers, twice.
    CHECK(compared == 4 * 39 * 2);
}

TEST_CASE(
    "tagged transfers leave the same exemplars, traces and spans with tallies as one by one") {
    // Classic histograms note each bucket's last tagged transfer as the round is tallied; with
    // native buckets too the round is walked back. Both must leave each bucket the exemplar of
    // its last tagged transfer, with that transfer's trace and span.
    tallied_beside_each m;
    const std::string_view peers[] = {"p1", "p2", "p1", "p3"};
    const char* ids[] = {"r0", "r1", "", "r3", "r4"};
    std::vector<xtel::transfer_record> round;
    std::vector<xtel::transfer_trace> traces;
    for (std::uint64_t i = 0; i < 40; ++i) {
        xtel::transfer_record r =
            m.c.to(peers[i % 4], xtel::transfer_op::write, 100 + i, 3, i * 13 % 300).transfers[0];
        r.request_id = ids[i % 5];
        r.timestamp_us = 1000 + i;
        if (i % 5 == 3) {
            const auto n = static_cast<std::uint8_t>(i);
            traces.push_back({.index = i, .trace_id = {n, 1}, .span_id = {n, 2}});
        }
        round.push_back(r);
    }
    round[18].timed = false;  // tagged, but no time: no exemplar
    m.apply(round, traces);
    std::size_t kept = 0, traced = 0;
    m.compare([&](const auto&, const auto& mine_series, const auto& theirs_series) {
        const auto& mine = mine_series.exemplars;
        const auto& theirs = theirs_series.exemplars;
        REQUIRE(mine.size() == theirs.size());
        for (std::size_t b = 0; b < mine.size(); ++b) {
            INFO("bucket " << b);
            CHECK(mine[b].label_value == theirs[b].label_value);
            CHECK(mine[b].value == theirs[b].value);
            CHECK(mine[b].timestamp_us == theirs[b].timestamp_us);
            CHECK(mine[b].trace_id == theirs[b].trace_id);
            CHECK(mine[b].span_id == theirs[b].span_id);
            kept += mine[b].label_value.empty() ? 0 : 1;
            traced += mine[b].span_id[1] == 2 ? 1 : 0;
        }
    });
    // Some buckets of the histogram of all transfers and of each peer's have an exemplar, and
    // some of those name a span: the comparison is not of empty lists.
    CHECK(kept >= 8);
    CHECK(traced >= 2);
}

}  // namespace metrics_prometheus_test
