#include <catch2/catch.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"
#include "xtel/metrics/processor.hpp"

namespace metrics_processor_test {

using namespace xtel::metrics;
using xtel::direction;
using xtel::transfer_record;

namespace {

using full_processor = processor<legacy_builder, comprehensive_builder, time_builder>;

/// Transfer records with interned peers, as the agent makes them.
struct records_under_test {
    transfer_record make(std::string_view peer,
                         xtel::transfer_op op,
                         std::uint64_t bytes,
                         std::uint64_t xfer_us,
                         xtel::transfer_status st = xtel::transfer_status::success) {
        transfer_record r;
        r.bytes = bytes;
        r.requests = 1;
        r.post_us = 1;
        r.xfer_us = xfer_us;
        r.dir = op == xtel::transfer_op::write ? direction::tx : direction::rx;
        r.attrs.backend = labels.intern("ucx");
        r.attrs.remote_agent = labels.intern(peer);
        r.attrs.op = op;
        r.attrs.status = st;
        return r;
    }

    xtel::label_table labels;
};

std::optional<std::uint64_t> bytes_of(const metric_store& s,
                                      std::string_view peer,
                                      std::string_view op) {
    const auto* f = s.find("xtel_transfer_bytes_total");
    if (f == nullptr) {
        return std::nullopt;
    }
    for (const auto& series : f->all_series()) {
        if (series.label_values[5] == peer && series.label_values[1] == op) {
            return series.value;
        }
    }
    return std::nullopt;
}

/// A user builder: transfers per peer, made at run time.
class per_peer_builder : public builder {
  public:
    std::string_view name() const noexcept override { return "per_peer"; }
    void setup(metric_store& store, const attribute_registry&) override {
        family_ = store.add_family(
            {"user_transfers_by_peer_total", "Transfers by peer.", metric_type::counter, {"peer"}});
    }
    void build(const transfer_group& g, metric_store& store) override {
        ++calls;
        store.add(family_, {g.data.find("remote_agent")->label}, g.totals.transfers);
    }
    int calls = 0;

  private:
    family_id family_ = 0;
};

class throwing_builder : public builder {
  public:
    void build(const transfer_group&, metric_store&) override { throw std::runtime_error("boom"); }
};

}  // namespace

TEST_CASE("a processor with all three builders fills every family from one batch") {
    records_under_test t;
    full_processor p({"a", "h"});
    const std::vector<transfer_record> batch = {t.make("d1", xtel::transfer_op::write, 4096, 10),
                                                t.make("d1", xtel::transfer_op::write, 4096, 30),
                                                t.make("d2", xtel::transfer_op::write, 100, 5),
                                                t.make("d1", xtel::transfer_op::read, 64, 7)};
    p.process(batch, t.labels);
    const auto& s = p.store();
    CHECK(s.value("agent_tx_bytes_total", {"h"}) == 8292u);
    CHECK(s.value("agent_tx_requests_num_total", {"h"}) == 3u);
    CHECK(s.value("agent_rx_bytes_total", {"h"}) == 64u);
    CHECK(bytes_of(s, "d1", "write") == 8192u);
    CHECK(bytes_of(s, "d2", "write") == 100u);
    CHECK(bytes_of(s, "d1", "read") == 64u);
    CHECK(s.value("xtel_transfer_time_seconds_total",
                  {"ucx", "write", "tx", "dram", "dram", "d1", "success", "unknown"}) == 40u);
    CHECK(s.value("xtel_transfer_post_time_seconds_total",
                  {"ucx", "write", "tx", "dram", "dram", "d1", "success", "unknown"}) == 2u);
    CHECK(s.value("xtel_transfer_timed_total",
                  {"ucx", "write", "tx", "dram", "dram", "d1", "success", "unknown"}) == 2u);
    CHECK(p.cached_groups() == 3);
}

TEST_CASE("records without times add their requests and bytes, not to the times") {
    records_under_test t;
    full_processor p({"a", "h"});
    auto counted = t.make("d1", xtel::transfer_op::write, 5 * 4096, 0);
    counted.requests = 5;
    counted.post_us = 0;
    counted.timed = false;
    const std::vector<transfer_record> batch = {t.make("d1", xtel::transfer_op::write, 4096, 30),
                                                counted};
    p.process(batch, t.labels);
    const auto& s = p.store();
    const std::initializer_list<std::string_view> d1 = {"ucx",  "write", "tx",      "dram",
                                                        "dram", "d1",    "success", "unknown"};
    CHECK(s.value("agent_tx_requests_num_total", {"h"}) == 6u);
    CHECK(s.value("agent_tx_bytes_total", {"h"}) == 6u * 4096);
    CHECK(s.value("xtel_transfer_time_seconds_total", d1) == 30u);
    CHECK(s.value("xtel_transfer_timed_total", d1) == 1u);
}

TEST_CASE("batch after batch, totals add up exactly and nothing is counted twice") {
    records_under_test t;
    full_processor p;
    std::vector<transfer_record> batch;
    for (int i = 0; i < 1000; ++i) {
        batch.push_back(t.make(i % 2 == 0 ? "even" : "odd", xtel::transfer_op::write, 1000, 1));
    }
    p.process(batch, t.labels);
    p.process(batch, t.labels);
    p.process(std::span<const transfer_record>{}, t.labels);
    p.process(std::span(batch).first(3), t.labels);
    CHECK(p.store().value("agent_tx_bytes_total", {""}) == 2003000u);
    CHECK(bytes_of(p.store(), "even", "write") == 1002000u);
    CHECK(bytes_of(p.store(), "odd", "write") == 1001000u);
    CHECK(p.cached_groups() == 2);
}

TEST_CASE("a processor runs only the compile-time builders its options name") {
    records_under_test t;
    full_processor p({}, default_attributes(), {.builders = std::vector<std::string>{"time"}});
    CHECK_FALSE(p.enabled<legacy_builder>());
    CHECK_FALSE(p.enabled<comprehensive_builder>());
    CHECK(p.enabled<time_builder>());
    p.process(std::vector{t.make("d1", xtel::transfer_op::write, 10, 3)}, t.labels);
    CHECK(p.store().find("agent_tx_bytes_total") == nullptr);
    CHECK(p.store().find("xtel_transfer_bytes_total") == nullptr);
    CHECK(p.store().value("xtel_transfer_time_seconds_total", {"ucx", "write", "tx", "dram", "dram",
                                                               "d1", "success", "unknown"}) == 3u);
}

TEST_CASE("an unknown builder name is refused with the names there are") {
    CHECK_THROWS_WITH(full_processor({}, default_attributes(),
                                     {.builders = std::vector<std::string>{"legacy", "fancy"}}),
                      "builder 'fancy' is unknown: expected one of legacy, comprehensive, time");
}

TEST_CASE("a builder added at run time sees every group after the compile-time ones") {
    records_under_test t;
    processor<legacy_builder> p;
    auto user = std::make_unique<per_peer_builder>();
    auto* u = user.get();
    p.add_builder(std::move(user));
    const std::vector<transfer_record> batch = {t.make("Peer-A", xtel::transfer_op::write, 1, 1),
                                                t.make("Peer-A", xtel::transfer_op::read, 1, 1),
                                                t.make("Peer-B", xtel::transfer_op::write, 1, 1),
                                                t.make("Peer-A", xtel::transfer_op::write, 1, 1)};
    p.process(batch, t.labels);
    CHECK(u->calls == 3);  // three groups, not four transfers
    CHECK(p.store().value("user_transfers_by_peer_total", {"Peer-A"}) == 3u);
    CHECK(p.store().value("user_transfers_by_peer_total", {"Peer-B"}) == 1u);
    CHECK(p.store().value("agent_tx_bytes_total", {""}) == 3u);
}

TEST_CASE("a run-time builder that throws is counted and the others go on") {
    records_under_test t;
    processor<> p;
    p.add_builder(std::make_unique<throwing_builder>());
    p.add_builder(std::make_unique<per_peer_builder>());
    p.process(std::vector{t.make("x", xtel::transfer_op::write, 1, 1),
                          t.make("y", xtel::transfer_op::write, 1, 1)},
              t.labels);
    CHECK(p.builder_failures() == 2);
    CHECK(p.store().value("user_transfers_by_peer_total", {"x"}) == 1u);
    CHECK(p.store().value("user_transfers_by_peer_total", {"y"}) == 1u);
    CHECK_THROWS_AS(p.add_builder(nullptr), metrics_error);
}

TEST_CASE("one more registry entry is one more label on the comprehensive series") {
    records_under_test t;
    auto registry = default_attributes();
    registry.add({"ok", "success", attribute_type::boolean, false, 75});
    processor<comprehensive_builder> p({"a", "h"}, registry);
    p.process(
        std::vector{t.make("d1", xtel::transfer_op::write, 512, 1),
                    t.make("d1", xtel::transfer_op::write, 8, 1, xtel::transfer_status::error)},
        t.labels);
    const auto* f = p.store().find("xtel_transfer_bytes_total");
    REQUIRE(f != nullptr);
    CHECK(f->spec().label_names.size() == 9);
    CHECK(f->spec().label_names[7] == "ok");
    CHECK(p.store().value("xtel_transfer_bytes_total", {"ucx", "write", "tx", "dram", "dram", "d1",
                                                        "success", "true", "unknown"}) == 512u);
    CHECK(p.store().value("xtel_transfer_bytes_total", {"ucx", "write", "tx", "dram", "dram", "d1",
                                                        "error", "false", "unknown"}) == 8u);
}

TEST_CASE("a registry entry for a raw key transfers lack stops the processor at set-up") {
    auto registry = default_attributes();
    registry.add({"rack", "rack", attribute_type::string, std::string("r0"), 90});
    CHECK_THROWS_WITH(processor<comprehensive_builder>({}, registry),
                      Catch::Contains("raw key 'rack', which transfer records do not provide"));
}

TEST_CASE("peers past the series limit fold into 'other' and the folded counter is exact") {
    records_under_test t;
    processor<comprehensive_builder> p({}, default_attributes(), {.max_series = 3});
    std::vector<transfer_record> batch;
    for (int peer = 0; peer < 10; ++peer) {
        for (int i = 0; i < 2; ++i) {
            batch.push_back(
                t.make("peer" + std::to_string(peer), xtel::transfer_op::write, 100, 1));
        }
    }
    p.process(batch, t.labels);
    p.process(batch, t.labels);
    const auto* f = p.store().find("xtel_transfer_bytes_total");
    REQUIRE(f != nullptr);
    CHECK(f->all_series().size() == 4);
    CHECK(bytes_of(p.store(), "peer0", "write") == 400u);
    CHECK(bytes_of(p.store(), "peer2", "write") == 400u);
    CHECK(bytes_of(p.store(), "peer3", "write") == std::nullopt);
    CHECK(p.store().value("xtel_transfer_bytes_total", {"other", "other", "other", "other", "other",
                                                        "other", "other", "other"}) == 2800u);
    // 7 peers' groups folded in each of 2 batches, in each of the two families.
    CHECK(p.store().value(metric_store::folded_family, {"xtel_transfer_bytes_total"}) == 14u);
    CHECK(p.store().value(metric_store::folded_family, {"xtel_transfer_requests_total"}) == 14u);
}

TEST_CASE("a small group cache starts again and the values stay exact") {
    records_under_test t;
    processor<comprehensive_builder> p({}, default_attributes(), {.max_cached_groups = 4});
    std::vector<transfer_record> batch;
    for (int peer = 0; peer < 50; ++peer) {
        batch.push_back(t.make("p" + std::to_string(peer), xtel::transfer_op::write, 1 + peer, 1));
    }
    for (int round = 0; round < 3; ++round) {
        p.process(batch, t.labels);
    }
    for (int peer = 0; peer < 50; ++peer) {
        INFO(peer);
        CHECK(bytes_of(p.store(), "p" + std::to_string(peer), "write") == 3u * (1 + peer));
    }
}

TEST_CASE("records of another label table are normalized again, not read from the cache") {
    records_under_test first;
    records_under_test second;
    processor<comprehensive_builder> p;
    const auto a = first.make("alpha", xtel::transfer_op::write, 1, 1);
    const auto b = second.make("beta", xtel::transfer_op::write, 2, 1);
    // The same ids name other strings in the second table.
    REQUIRE(a.attrs == b.attrs);
    p.process(std::vector{a}, first.labels);
    p.process(std::vector{b}, second.labels);
    CHECK(bytes_of(p.store(), "alpha", "write") == 1u);
    CHECK(bytes_of(p.store(), "beta", "write") == 2u);
}

TEST_CASE("processing a batch calls the builders once per distinct attribute set") {
    records_under_test t;
    processor<> p;
    auto user = std::make_unique<per_peer_builder>();
    auto* u = user.get();
    p.add_builder(std::move(user));
    std::vector<transfer_record> batch;
    for (int i = 0; i < 4096; ++i) {
        batch.push_back(t.make(i % 3 == 0 ? "a" : "b",
                               i % 2 == 0 ? xtel::transfer_op::write : xtel::transfer_op::read, 1,
                               1));
    }
    p.process(batch, t.labels);
    CHECK(u->calls == 4);
    CHECK(p.store().value("user_transfers_by_peer_total", {"a"}) == 1366u);
    CHECK(p.store().value("user_transfers_by_peer_total", {"b"}) == 2730u);
}

}  // namespace metrics_processor_test
