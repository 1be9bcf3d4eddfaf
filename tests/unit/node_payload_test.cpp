// What an agent's node exporter publishes: the metric model in its node-file form, whose snapshot
// every reader must accept (decode_snapshot), so the agent leaves out and reserves the labels a
// reader adds to every series.

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/builder.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace node_payload_test {

using xtel::metrics::agent_metrics;
using xtel::metrics::agent_metrics_settings;
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

agent_metrics_settings settings(std::vector<double> buckets,
                                std::vector<std::string> builders,
                                xtel::process_rank rank = {}) {
    agent_metrics_settings s;
    s.hostname = "host";
    s.sets = xtel::metrics::family_sets::both;
    s.buckets = std::move(buckets);
    s.builders = std::move(builders);
    s.max_series = 100;
    s.rank = rank;
    return s;
}

/// The snapshot as the node exporter writes it: without the labels its readers add.
std::vector<std::byte> node_form(const agent_metrics& agent) {
    std::vector<std::byte> bytes;
    xtel::metrics::encode_snapshot(*agent.latest(), bytes, xtel::metrics::reserved_label_names);
    return bytes;
}

const family_spec& spec_of(const xtel::metrics::snapshot& s, std::string_view name) {
    const auto it = std::find_if(s.families.begin(), s.families.end(),
                                 [&](const auto& f) { return f.spec.name == name; });
    REQUIRE(it != s.families.end());
    return it->spec;
}

}  // namespace

TEST_CASE("an agent's node-file snapshot decodes with an xtel_agent_info without a pid label") {
    agent_metrics agent("a", settings({10, 100}, {"legacy", "comprehensive", "time"}, {3, 1}));
    agent.reserve_reader_labels();
    agent.publish();
    const auto back = xtel::metrics::decode_snapshot(node_form(agent));
    // The exporter adds the writer's pid to every series; a pid of its own would be twice.
    const auto& info = *std::find_if(back.families.begin(), back.families.end(), [](const auto& f) {
        return f.spec.name == "xtel_agent_info";
    });
    CHECK(info.spec.label_names == std::vector<std::string>{"backend"});
    REQUIRE(info.series.size() == 1);
    CHECK(info.series[0].label_values == std::vector<std::string>{"ucx"});
    // Nothing else is left out: every other family is as the model has it.
    const auto& model = *agent.latest();
    REQUIRE(back.families.size() == model.families.size());
    for (std::size_t i = 0; i < back.families.size(); ++i) {
        if (model.families[i].spec.name != "xtel_agent_info") {
            CHECK(back.families[i] == model.families[i]);
        }
    }
    CHECK(back.labels == model.labels);
}

TEST_CASE("an agent's own /metrics keeps the pid label of xtel_agent_info") {
    agent_metrics agent("a", settings({10, 100}, {"legacy"}));
    agent.reserve_reader_labels();  // the model a node exporter serves too
    agent.publish();
    CHECK(spec_of(*agent.latest(), "xtel_agent_info").label_names ==
          std::vector<std::string>{"backend", "pid"});
}

TEST_CASE(
    "a builder's family with a label every node-file reader adds is refused where it is "
    "added") {
    for (const std::string label : {"pid", "instance", "rank", "local_rank"}) {
        INFO(label);
        agent_metrics node("a", settings({10}, {"legacy"}));
        node.reserve_reader_labels();
        CHECK_THROWS_WITH(
            node.add_builder(std::make_unique<one_family>(
                family_spec{"mine_total", "h", metric_type::counter, {label}})),
            Catch::Contains("label '" + label + "' of metric family 'mine_total' is reserved"));
    }
    // The agent's own endpoint adds neither pid nor instance: there they are ordinary labels.
    agent_metrics own("a", settings({10}, {"legacy"}));
    CHECK_NOTHROW(own.add_builder(std::make_unique<one_family>(
        family_spec{"mine_total", "h", metric_type::counter, {"instance"}})));
}

TEST_CASE(
    "peers whose names differ only in bytes that are not UTF-8 are one series the readers take") {
    agent_metrics agent("a", settings({10, 100}, {"legacy", "comprehensive", "time"}));
    agent.reserve_reader_labels();
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
    const auto back = xtel::metrics::decode_snapshot(node_form(agent));  // refused whole before
    const auto& f = *std::find_if(back.families.begin(), back.families.end(), [](const auto& f) {
        return f.spec.name == "xtel_transfer_bytes_total";
    });
    REQUIRE(f.series.size() == 1);
    CHECK(f.series[0].value == 200);
    CHECK(std::find(f.series[0].label_values.begin(), f.series[0].label_values.end(),
                    "r\xEF\xBF\xBD"
                    "ad") != f.series[0].label_values.end());
}

}  // namespace node_payload_test
