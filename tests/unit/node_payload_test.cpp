// What an agent's node exporter publishes: the metric model in its node-file form, whose snapshot
// every reader must accept (decode_snapshot), so the agent leaves out and reserves the labels a
// reader adds to every series.

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "exporters/prometheus/prometheus_agent.hpp"
#include "xtel/metrics/builder.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

using xtel::detail::pid_shown_by;
using xtel::detail::prometheus_agent;
using xtel::metrics::family_spec;
using xtel::metrics::metric_type;

namespace {

class one_family : public xtel::metrics::builder {
  public:
    explicit one_family(family_spec spec) : spec_(std::move(spec)) {}
    void setup(xtel::metrics::metric_store& store,
               const xtel::metrics::attribute_registry&) override {
        store.add_family(spec_);
    }
    void build(const xtel::metrics::transfer_group&, xtel::metrics::metric_store&) override {}

  private:
    family_spec spec_;
};

const family_spec& spec_of(const xtel::metrics::snapshot& s, std::string_view name) {
    const auto it = std::find_if(s.families.begin(), s.families.end(),
                                 [&](const auto& f) { return f.spec.name == name; });
    REQUIRE(it != s.families.end());
    return it->spec;
}

}  // namespace

TEST_CASE("an agent's node-file snapshot decodes with an xtel_agent_info without a pid label") {
    prometheus_agent agent("a", "host", {10, 100}, {"legacy", "comprehensive", "time"}, 100,
                           xtel::process_rank{3, 1}, pid_shown_by::reader);
    agent.publish();
    std::vector<std::byte> bytes;
    xtel::metrics::encode_snapshot(*agent.snapshot(), bytes);
    const auto back = xtel::metrics::decode_snapshot(bytes);
    CHECK(back == *agent.snapshot());
    // The exporter adds the writer's pid to every series; a pid of its own would be twice.
    CHECK(spec_of(back, "xtel_agent_info").label_names == std::vector<std::string>{"backend"});
}

TEST_CASE("an agent's own /metrics keeps the pid label of xtel_agent_info") {
    prometheus_agent agent("a", "host", {10, 100}, {"legacy"}, 100, {}, pid_shown_by::agent);
    agent.publish();
    CHECK(spec_of(*agent.snapshot(), "xtel_agent_info").label_names ==
          std::vector<std::string>{"backend", "pid"});
}

TEST_CASE(
    "a builder's family with a label every node-file reader adds is refused where it is "
    "added") {
    for (const std::string label : {"pid", "instance", "rank", "local_rank"}) {
        INFO(label);
        prometheus_agent node("a", "host", {10}, {"legacy"}, 100, {}, pid_shown_by::reader);
        CHECK_THROWS_WITH(
            node.add_builder(std::make_unique<one_family>(
                family_spec{"mine_total", "h", metric_type::counter, {label}})),
            Catch::Contains("label '" + label + "' of metric family 'mine_total' is reserved"));
    }
    // The agent's own endpoint adds neither pid nor instance: there they are ordinary labels.
    prometheus_agent own("a", "host", {10}, {"legacy"}, 100, {}, pid_shown_by::agent);
    CHECK_NOTHROW(own.add_builder(std::make_unique<one_family>(
        family_spec{"mine_total", "h", metric_type::counter, {"instance"}})));
}

TEST_CASE(
    "peers whose names differ only in bytes that are not UTF-8 are one series the readers take") {
    prometheus_agent agent("a", "host", {10, 100}, {"legacy", "comprehensive", "time"}, 100, {},
                           pid_shown_by::reader);
    xtel::label_table labels;
    std::vector<xtel::transfer_record> records(2);
    // Two remote metadata blobs naming "r\x95ad" and "r\xe5ad": readers show both as r<U+FFFD>ad.
    records[0].attrs.remote_agent = labels.intern(
        "r\x95"
        "ad");
    records[1].attrs.remote_agent = labels.intern(
        "r\xe5"
        "ad");
    for (auto& r : records) {
        r.bytes = 100;
        r.requests = 1;
        r.xfer_us = 5;
        r.post_us = 1;
    }
    agent.apply_transfers(records, labels);
    agent.publish();
    std::vector<std::byte> bytes;
    xtel::metrics::encode_snapshot(*agent.snapshot(), bytes);
    const auto back = xtel::metrics::decode_snapshot(bytes);  // refused whole before
    const auto& f = *std::find_if(back.families.begin(), back.families.end(), [](const auto& f) {
        return f.spec.name == "xtel_transfer_bytes_total";
    });
    REQUIRE(f.series.size() == 1);
    CHECK(f.series[0].value == 200);
    CHECK(std::find(f.series[0].label_values.begin(), f.series[0].label_values.end(),
                    "r\xEF\xBF\xBD"
                    "ad") != f.series[0].label_values.end());
}
