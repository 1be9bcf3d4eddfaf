// The metric state exporters declare (`using metric_state = M;`): the pipeline owns one, folds
// each round into it once on the flusher thread, and every exporter that declares it serves
// that one; with prometheus and node named, /metrics and the node file show the same state.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/back_end.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/exporters/prometheus.hpp"
#include "xtel/metrics/builder.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

namespace shared_metric_state_test {

namespace {

const xtel::telemetry_options manual{.start_flusher = false};

/// A metric state that counts what the pipeline folds into it.
struct counting_state {
    explicit counting_state(const xtel::exporter_context&) {}
    void apply(std::span<const xtel::event> batch) { events += batch.size(); }
    void apply_transfers(std::span<const xtel::transfer_record> t, const xtel::label_table&) {
        transfers += t.size();
    }
    void apply_health(std::span<const xtel::exporter_health>) { ++health_rounds; }
    void publish() { ++published; }

    std::uint64_t events = 0;
    std::uint64_t transfers = 0;
    std::uint64_t health_rounds = 0;
    std::uint64_t published = 0;
};

/// Serves counting_state; I tells two of them apart.
template <int I>
class serving {
  public:
    using metric_state = counting_state;
    explicit serving(const xtel::metric_state_context<counting_state>& m) : state_(m.state) {}
    const counting_state* state() const noexcept { return state_.get(); }

  private:
    std::shared_ptr<counting_state> state_;
};

/// Serves none.
struct plain {
    explicit plain(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event>) {}
};

xtel::config enabled() {
    xtel::config cfg;
    cfg.enabled = true;
    return cfg;
}

/// Counts, in the family test_transfers_seen_total, every transfer the model shows it.
class transfers_seen : public xtel::metrics::builder {
  public:
    explicit transfers_seen(std::atomic<std::uint64_t>& seen) : seen_(seen) {}
    void setup(xtel::metrics::metric_store& store,
               const xtel::metrics::attribute_registry&) override {
        family_ = store.add_family({"test_transfers_seen_total", "Transfers the builder saw.",
                                    xtel::metrics::metric_type::counter});
        series_ = store.series_of(family_, {});
    }
    void build(const xtel::metrics::transfer_group& g,
               xtel::metrics::metric_store& store) override {
        seen_ += g.totals.transfers;
        store.add(series_, g.totals.transfers);
    }

  private:
    std::atomic<std::uint64_t>& seen_;
    xtel::metrics::family_id family_ = 0;
    xtel::metrics::series_ref series_;
};

const xtel::metrics::family_snapshot& family(const xtel::metrics::snapshot& s,
                                             std::string_view name) {
    const auto it = std::find_if(s.families.begin(), s.families.end(),
                                 [&](const auto& f) { return f.spec.name == name; });
    REQUIRE(it != s.families.end());
    return *it;
}

}  // namespace

TEST_CASE("two exporters that serve one metric state get the one the pipeline folds once") {
    STATIC_REQUIRE(xtel::telemetry<serving<0>, serving<1>>::owns_metric_state);
    xtel::telemetry<serving<0>, serving<1>> t(enabled(), "shared", manual);
    const counting_state* state = t.get<serving<0>>().state();
    REQUIRE(state != nullptr);
    CHECK(t.get<serving<1>>().state() == state);
    CHECK(&t.metric_state() == state);
    for (int i = 0; i < 5; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 10, 1, 5, 50);
    }
    t.add(xtel::category::custom, "app_hits", 1);
    t.flush();
    CHECK(state->transfers == 5);
    // The model takes transfer records: the events derived from them are not folded again.
    CHECK(state->events == 1);
    CHECK(state->health_rounds == 1);
    CHECK(state->published == 1);
}

TEST_CASE("a pipeline whose exporters serve no metric state owns none") {
    STATIC_REQUIRE_FALSE(xtel::telemetry<plain>::owns_metric_state);
    STATIC_REQUIRE_FALSE(xtel::telemetry<>::owns_metric_state);
    STATIC_REQUIRE(xtel::telemetry<plain, serving<0>>::owns_metric_state);
}

TEST_CASE("with prometheus and node named, /metrics and the node file serve one model folded once",
          "[node_file]") {
    const xtel_test::temp_dir dir;
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    const auto cfg = xtel_test::enabled_config({"prometheus", "node"}, dir.path().string());
    xtel::telemetry<xtel::prometheus_exporter, xtel::node_exporter> t(cfg, "both", manual);
    std::atomic<std::uint64_t> seen{0};
    t.metric_state().add_builder(std::make_unique<transfers_seen>(seen));
    for (int i = 0; i < 7; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 10, 1, 5, 50);
    }
    t.flush();
    CHECK(seen == 7);  // twice 7 when each exporter folded a model of its own

    const auto text = t.get<xtel::prometheus_exporter>().scrape();
    CHECK(text.find("\ntest_transfers_seen_total{agent_name=\"both\"} 7\n") != std::string::npos);
    CHECK(text.find("xtel_agent_info{agent_name=\"both\",backend=\"ucx\",pid=\"") !=
          std::string::npos);

    xtel::node::file::reader r(dir.path() / "both.metrics");
    const auto p = r.read_latest();
    REQUIRE(p);
    const auto node = xtel::metrics::decode_snapshot(p->payload);
    const auto& mine = family(node, "test_transfers_seen_total");
    REQUIRE(mine.series.size() == 1);
    CHECK(mine.series[0].value == 7);
    // Its readers add the writer's pid: the node file leaves xtel_agent_info's out.
    CHECK(family(node, "xtel_agent_info").spec.label_names == std::vector<std::string>{"backend"});
    CHECK(family(node, "agent_tx_bytes_total").series[0].value == 70);
}

TEST_CASE(
    "with prometheus and node named, the back end's span stage writes each slow transfer's "
    "span once into the node's ring and /metrics counts it",
    "[node_file][spans]") {
    const xtel_test::temp_dir dir;
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env slow(xtel::trace::env::trace_slow_us, "0");  // every one slow
    STATIC_REQUIRE(xtel::back_end<xtel::prometheus_exporter, xtel::node_exporter>::owns_span_stage);
    const auto cfg = xtel_test::enabled_config({"prometheus", "node"}, dir.path().string());
    xtel::telemetry<xtel::prometheus_exporter, xtel::node_exporter> t(cfg, "spans", manual);
    for (int i = 0; i < 7; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 10, 1, 5, 50);
    }
    t.flush();
    xtel::trace::span_ring::reader ring(dir.path() / "spans.spans");
    std::vector<xtel::trace::span_ring::span_record> spans;
    ring.read(spans);
    CHECK(spans.size() == 7);
    const auto text = t.get<xtel::prometheus_exporter>().scrape();
    CHECK(text.find("\nxtel_trace_spans_total{agent_name=\"spans\",reason=\"slow\"} 7\n") !=
          std::string::npos);
    CHECK(text.find("\nxtel_trace_spans_dropped_total{agent_name=\"spans\",reason=\"ring\"} 0\n") !=
          std::string::npos);
}

TEST_CASE(
    "a pipeline of prometheus alone has no span stage: it samples nothing and serves no "
    "span family",
    "[spans]") {
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env slow(xtel::trace::env::trace_slow_us, "0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    STATIC_REQUIRE_FALSE(xtel::back_end<xtel::prometheus_exporter>::owns_span_stage);
    const auto cfg = xtel_test::enabled_config({"prometheus"});
    xtel::telemetry<xtel::prometheus_exporter> t(cfg, "no_spans", manual);
    t.record_transfer(xtel::direction::tx, 1, 10, 1, 5, 50);
    t.flush();
    const auto text = t.get<xtel::prometheus_exporter>().scrape();
    CHECK(text.find("agent_tx_bytes_total{agent_name=\"no_spans\"") != std::string::npos);
    CHECK(text.find("xtel_trace_spans") == std::string::npos);
}

}  // namespace shared_metric_state_test
