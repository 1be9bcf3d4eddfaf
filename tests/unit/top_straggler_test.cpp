// xtel top's straggler peers: the rule of monitoring/rules over the node's per-peer transfer
// times (k = 3 times the median p99 and 0.5 ms above it, 100 timed transfers, 3 peers), and the
// window of readings it is applied over.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "straggler.hpp"

namespace top_straggler_test {

using namespace xtel::top;
using namespace std::chrono_literals;

namespace {

/// Bounds 100 us, 1 ms, 10 ms (seconds).
const std::vector<double> bounds = {0.0001, 0.001, 0.01};

latency_histogram in_bucket(std::size_t bucket, std::uint64_t n) {
    latency_histogram h{bounds, {0, 0, 0}, n};
    if (bucket < h.buckets.size()) {
        h.buckets[bucket] = n;
    }
    return h;
}

/// An agent's snapshot with xtel_transfer_duration_seconds series (us, shown in seconds) of
/// (operation, remote_agent) with `n` transfers in bucket `bucket` each.
xtel::metrics::snapshot agent(
    std::vector<std::tuple<std::string, std::string, std::size_t, std::uint64_t>> series) {
    xtel::metrics::family_snapshot f;
    f.spec.name = "xtel_transfer_duration_seconds";
    f.spec.type = xtel::metrics::metric_type::histogram;
    f.spec.decimals = 6;
    f.spec.bounds = {100, 1000, 10000};
    f.spec.label_names = {"agent_name", "operation", "remote_agent"};
    for (const auto& [op, peer, bucket, n] : series) {
        xtel::metrics::series s;
        s.label_values = {"i", op, peer};
        s.buckets = {0, 0, 0};
        s.buckets[bucket] = n;
        s.count = n;
        f.series.push_back(s);
    }
    xtel::metrics::snapshot snap;
    snap.families.push_back(f);
    return snap;
}

std::vector<std::string> peers(const std::vector<straggler>& s) {
    std::vector<std::string> out;
    for (const auto& x : s) {
        out.push_back(x.operation + " " + x.remote_agent);
    }
    return out;
}

}  // namespace

TEST_CASE("xtel top flags the one peer whose p99 is over 3 times the median of the node's peers",
          "[top][straggler]") {
    const peer_histograms delta = {{{"write", "t0"}, in_bucket(0, 100)},
                                   {{"write", "t1"}, in_bucket(0, 100)},
                                   {{"write", "t2"}, in_bucket(0, 100)},
                                   {{"write", "t3"}, in_bucket(1, 100)}};
    const auto s = find_stragglers(delta, 10s);
    REQUIRE(peers(s) == std::vector<std::string>{"write t3"});
    // p99 interpolated as histogram_quantile does: 100 us + 0.99 x 900 us; the median of
    // 99, 99, 99 and 991 us is 99 us.
    CHECK(s[0].p99 == Approx(0.000991));
    CHECK(s[0].median == Approx(0.000099));
    CHECK(s[0].ratio == Approx(10.0101).epsilon(1e-4));
    CHECK(s[0].timed == 100);
    CHECK(straggler_line(s[0]) == "straggler  write to t3  p99 991us = 10.0x the median 99.0us");
}

TEST_CASE("xtel top flags no straggler among peers alike, nor per operation across operations",
          "[top][straggler]") {
    // Reads are all slow and writes all fast: each operation is its own median.
    const peer_histograms delta = {
        {{"write", "t0"}, in_bucket(0, 100)}, {{"write", "t1"}, in_bucket(0, 100)},
        {{"write", "t2"}, in_bucket(0, 100)}, {{"read", "t0"}, in_bucket(2, 100)},
        {{"read", "t1"}, in_bucket(2, 100)},  {{"read", "t2"}, in_bucket(2, 100)}};
    CHECK(find_stragglers(delta, 10s).empty());
}

TEST_CASE("xtel top leaves out peers with under 100 timed transfers, and needs 3 peers",
          "[top][straggler]") {
    // t3 is slow but timed 99 times in the window: its p99 would be its slowest transfer but
    // one. Without it two peers are left.
    const peer_histograms delta = {{{"write", "t0"}, in_bucket(0, 100)},
                                   {{"write", "t1"}, in_bucket(0, 100)},
                                   {{"write", "t3"}, in_bucket(1, 99)}};
    CHECK(find_stragglers(delta, 100s).empty());
    // At 100 it qualifies: of three peers the median is the middle one, fast.
    const peer_histograms enough = {{{"write", "t0"}, in_bucket(0, 100)},
                                    {{"write", "t1"}, in_bucket(0, 100)},
                                    {{"write", "t3"}, in_bucket(1, 100)}};
    CHECK(peers(find_stragglers(enough, 100s)) == std::vector<std::string>{"write t3"});
    // Two peers: never.
    const peer_histograms two = {{{"write", "t0"}, in_bucket(0, 100)},
                                 {{"write", "t3"}, in_bucket(2, 100)}};
    CHECK(find_stragglers(two, 10s).empty());
}

TEST_CASE("xtel top flags no peer whose p99 is within 0.5 ms of the median, whatever the ratio",
          "[top][straggler]") {
    // Bounds 100 us, 500 us, 1 ms: t3's p99 is 496 us, 5 times the median 99 us but 397 us
    // above it; the same peer at 995 us (896 us above) is flagged.
    const std::vector<double> fine = {0.0001, 0.0005, 0.001};
    const auto at = [&](std::size_t bucket) {
        latency_histogram h{fine, {0, 0, 0}, 100};
        h.buckets[bucket] = 100;
        return h;
    };
    const peer_histograms near = {{{"write", "t0"}, at(0)},
                                  {{"write", "t1"}, at(0)},
                                  {{"write", "t2"}, at(0)},
                                  {{"write", "t3"}, at(1)}};
    CHECK(find_stragglers(near, 10s).empty());
    const peer_histograms far = {{{"write", "t0"}, at(0)},
                                 {{"write", "t1"}, at(0)},
                                 {{"write", "t2"}, at(0)},
                                 {{"write", "t3"}, at(2)}};
    const auto s = find_stragglers(far, 10s);
    REQUIRE(peers(s) == std::vector<std::string>{"write t3"});
    CHECK(s[0].p99 == Approx(0.000995));
}

TEST_CASE(
    "xtel top finds stragglers over the transfers timed between its oldest and latest readings",
    "[top][straggler]") {
    straggler_tracker tracker(5min);
    const auto t0 = clock::time_point{} + 1h;
    peer_histograms at0;
    // Before the window: t3 was fast, with many transfers that would hide its slow ones.
    add_peer_histograms(agent({{"write", "t0", 0, 1000},
                               {"write", "t1", 0, 1000},
                               {"write", "t2", 0, 1000},
                               {"write", "t3", 0, 100000}}),
                        at0);
    CHECK(tracker.update(at0, t0).empty());  // one reading: no window yet
    peer_histograms at10;
    add_peer_histograms(
        agent({{"write", "t0", 0, 1100}, {"write", "t1", 0, 1100}, {"write", "t2", 0, 1100}}),
        at10);
    // t3 in another agent's snapshot: added per peer whatever the agent.
    add_peer_histograms(agent({{"write", "t3", 0, 100000}, {"write", "t3", 1, 100}}), at10);
    const auto s = tracker.update(at10, t0 + 10s);
    REQUIRE(peers(s) == std::vector<std::string>{"write t3"});
    CHECK(s[0].timed == 100);
    // Six minutes on, the first reading left the window: the latest is compared with the
    // second, and nothing was timed since.
    CHECK(tracker.update(at10, t0 + 6min).empty());
}

TEST_CASE("xtel top counts a peer's histogram that went back from zero", "[top][straggler]") {
    straggler_tracker tracker;
    const auto t0 = clock::time_point{} + 1h;
    peer_histograms before = {{{"write", "t0"}, in_bucket(0, 5000)},
                              {{"write", "t1"}, in_bucket(0, 5000)},
                              {{"write", "t2"}, in_bucket(0, 5000)},
                              {{"write", "t3"}, in_bucket(0, 5000)}};
    tracker.update(before, t0);
    // t3's agent restarted: its counts start again from 0, all slow.
    peer_histograms after = {{{"write", "t0"}, in_bucket(0, 5100)},
                             {{"write", "t1"}, in_bucket(0, 5100)},
                             {{"write", "t2"}, in_bucket(0, 5100)},
                             {{"write", "t3"}, in_bucket(1, 100)}};
    const auto s = tracker.update(after, t0 + 10s);
    REQUIRE(peers(s) == std::vector<std::string>{"write t3"});
    CHECK(s[0].timed == 100);
}

TEST_CASE("xtel top finds stragglers from native buckets when the family has no bounds",
          "[top][straggler]") {
    // xtel_transfer_duration_seconds kept native only, at schema 0: bucket i holds
    // (2^(i-1), 2^i] seconds. Peers t0 to t2 take (2^-14, 2^-13] s (61 to 122 us), t3
    // (2^-9, 2^-8] (2 to 3.9 ms); t3's series was downscaled to schema -1 (index -4 there).
    xtel::metrics::family_snapshot f;
    f.spec.name = "xtel_transfer_duration_seconds";
    f.spec.type = xtel::metrics::metric_type::histogram;
    f.spec.decimals = 6;
    f.spec.native = true;
    f.spec.native_schema = 0;
    f.spec.label_names = {"agent_name", "operation", "remote_agent"};
    const auto add = [&](std::string peer, std::int8_t schema, std::int32_t index) {
        xtel::metrics::series s;
        s.label_values = {"i", "write", std::move(peer)};
        s.native_schema = schema;
        s.native_first = index;
        s.native_buckets = {100};
        s.count = 100;
        f.series.push_back(s);
    };
    add("t0", 0, -13);
    add("t1", 0, -13);
    add("t2", 0, -13);
    add("t3", -1, -4);
    xtel::metrics::snapshot snap;
    snap.families.push_back(f);
    peer_histograms h;
    add_peer_histograms(snap, h);
    REQUIRE(h.size() == 4);
    REQUIRE(h.at({"write", "t3"}).native);
    CHECK(h.at({"write", "t3"}).native->schema == -1);
    const auto s = find_stragglers(h, 10s);
    REQUIRE(peers(s) == std::vector<std::string>{"write t3"});
    // p99 0.99 of the way into (2^-10, 2^-8] (schema -1's bucket -4), the median p99 into
    // (2^-14, 2^-13].
    CHECK(s[0].p99 == Approx(0x1p-10 + 0.99 * (0x1p-8 - 0x1p-10)).epsilon(1e-12));
    CHECK(s[0].median == Approx(0x1p-14 + 0.99 * 0x1p-14).epsilon(1e-12));
    CHECK(s[0].timed == 100);
}

}  // namespace top_straggler_test
