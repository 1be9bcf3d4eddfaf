// Each built-in builder on its own: a store, the builder, hand-made groups, exact values.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"

namespace metrics_builders_test {

using namespace xtel::metrics;

namespace {

/// A group of transfers as the processor hands it to builders.
struct group_under_test {
    group_under_test(std::string_view peer,
                     xtel::transfer_op op,
                     xtel::transfer_status st,
                     measurements m)
        : totals(m) {
        attrs.backend = labels.intern("ucx");
        attrs.remote_agent = labels.intern(peer);
        attrs.op = op;
        attrs.status = st;
        attrs.local_memory = xtel::memory_kind::vram;
        dir = op == xtel::transfer_op::write ? xtel::direction::tx : xtel::direction::rx;
        data = extract_telemetry_data(transfer_raw_record(attrs, dir, labels, ctx),
                                      default_attributes());
    }

    transfer_group view() const { return {data, totals, attrs, dir, ctx}; }

    xtel::label_table labels;
    context ctx{"agent-a", "node1"};
    xtel::transfer_attributes attrs;
    xtel::direction dir;
    measurements totals;
    telemetry_data data;
};

template <class B>
struct built {
    built() { b.setup(store, default_attributes()); }
    void feed(const group_under_test& g) { b.build(g.view(), store); }

    metric_store store;
    B b;
};

}  // namespace

TEST_CASE("the legacy builder sums completed bytes and requests per direction by hostname") {
    built<legacy_builder> t;
    t.feed({"decode-1",
            xtel::transfer_op::write,
            xtel::transfer_status::success,
            {3, 3, 12288, 90, 9}});
    t.feed(
        {"decode-2", xtel::transfer_op::write, xtel::transfer_status::success, {1, 2, 100, 5, 1}});
    t.feed(
        {"decode-1", xtel::transfer_op::read, xtel::transfer_status::success, {2, 2, 8192, 40, 4}});
    CHECK(t.store.value("agent_tx_bytes_total", {"node1"}) == 12388u);
    CHECK(t.store.value("agent_tx_requests_num_total", {"node1"}) == 5u);
    CHECK(t.store.value("agent_rx_bytes_total", {"node1"}) == 8192u);
    CHECK(t.store.value("agent_rx_requests_num_total", {"node1"}) == 2u);
    CHECK(t.store.find("agent_tx_bytes_total")->spec().label_names ==
          std::vector<std::string>{"hostname"});
}

TEST_CASE("the legacy builder leaves failed transfers out, as NIXL counts completed ones") {
    built<legacy_builder> t;
    t.feed(
        {"decode-1", xtel::transfer_op::write, xtel::transfer_status::error, {1, 1, 4096, 7, 1}});
    CHECK(t.store.value("agent_tx_bytes_total", {"node1"}) == std::nullopt);
    CHECK(t.store.value("agent_tx_requests_num_total", {"node1"}) == std::nullopt);
}

TEST_CASE(
    "the legacy families exist before any transfer, with help texts that say what they count") {
    built<legacy_builder> t;
    for (const auto* name : {"agent_tx_bytes_total", "agent_rx_bytes_total",
                             "agent_tx_requests_num_total", "agent_rx_requests_num_total"}) {
        INFO(name);
        REQUIRE(t.store.find(name) != nullptr);
        CHECK(t.store.find(name)->all_series().empty());
    }
    // Upstream's "received by the agent" would claim a target's bytes, which one-sided
    // transfers never show it (docs/metrics.md, the target side).
    CHECK(t.store.find("agent_rx_requests_num_total")->spec().help ==
          "Completed READ requests this agent initiated");
    CHECK_THAT(t.store.find("agent_rx_bytes_total")->spec().help,
               Catch::Contains("bytes a peer wrote into this agent's memory are not counted"));
}

TEST_CASE("the comprehensive builder makes one series per combination of attributes") {
    built<comprehensive_builder> t;
    t.feed(
        {"Decode-1", xtel::transfer_op::write, xtel::transfer_status::success, {2, 2, 8192, 1, 1}});
    t.feed(
        {"Decode-1", xtel::transfer_op::write, xtel::transfer_status::success, {1, 4, 100, 1, 1}});
    t.feed({"Decode-1", xtel::transfer_op::read, xtel::transfer_status::success, {1, 1, 64, 1, 1}});
    t.feed({"Decode-2", xtel::transfer_op::write, xtel::transfer_status::error, {1, 1, 32, 1, 1}});
    const auto* bytes = t.store.find("xtel_transfer_bytes_total");
    REQUIRE(bytes != nullptr);
    CHECK(bytes->spec().label_names == std::vector<std::string>{"backend", "operation", "direction",
                                                                "local_memory", "remote_memory",
                                                                "remote_agent", "status", "gpu"});
    CHECK(bytes->all_series().size() == 3);
    CHECK(t.store.value("xtel_transfer_bytes_total", {"ucx", "write", "tx", "vram", "dram",
                                                      "Decode-1", "success", "unknown"}) == 8292u);
    CHECK(t.store.value("xtel_transfer_requests_total", {"ucx", "write", "tx", "vram", "dram",
                                                         "Decode-1", "success", "unknown"}) == 6u);
    CHECK(t.store.value("xtel_transfer_bytes_total", {"ucx", "read", "rx", "vram", "dram",
                                                      "Decode-1", "success", "unknown"}) == 64u);
    CHECK(t.store.value("xtel_transfer_bytes_total", {"ucx", "write", "tx", "vram", "dram",
                                                      "Decode-2", "error", "unknown"}) == 32u);
}

TEST_CASE("the time builder accumulates transfer and post microseconds per attribute set") {
    built<time_builder> t;
    // 3 records, 2 of them timed, then 2 records of 9 requests with 1 timed.
    t.feed({"p", xtel::transfer_op::write, xtel::transfer_status::success, {3, 3, 1, 450, 21, 2}});
    t.feed({"p", xtel::transfer_op::write, xtel::transfer_status::success, {2, 9, 1, 50, 4, 1}});
    t.feed({"p", xtel::transfer_op::read, xtel::transfer_status::success, {1, 1, 1, 70, 2, 1}});
    const std::initializer_list<std::string_view> write = {"ucx",  "write", "tx",      "vram",
                                                           "dram", "p",     "success", "unknown"};
    CHECK(t.store.value("xtel_transfer_time_seconds_total", write) == 500u);
    CHECK(t.store.value("xtel_transfer_post_time_seconds_total", write) == 25u);
    CHECK(t.store.value("xtel_transfer_timed_total", write) == 3u);
    CHECK(t.store.value("xtel_transfer_time_seconds_total",
                        {"ucx", "read", "rx", "vram", "dram", "p", "success", "unknown"}) == 70u);
}

TEST_CASE("builders name themselves for configuration through their traits") {
    STATIC_REQUIRE(builder_traits<legacy_builder>::name == "legacy");
    STATIC_REQUIRE(builder_traits<comprehensive_builder>::name == "comprehensive");
    STATIC_REQUIRE(builder_traits<time_builder>::name == "time");
}

}  // namespace metrics_builders_test
