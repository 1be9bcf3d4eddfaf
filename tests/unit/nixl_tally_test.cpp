// The plug-in's sums of a NIXL flush (nixl/transfer_tallies.hpp): the model serves from them
// exactly what it serves from the same transfers as records, and the transfers that may become
// spans still travel as records, at the configured fraction.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nixl/transfer_tallies.hpp"
#include "test_util.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace nixl_tally_test {

using xtel::direction;
using xtel::transfer_record;
using xtel::metrics::agent_metrics;
using xtel::nixl::bucket_finder;
using xtel::nixl::flush_tallies;

namespace {

xtel::metrics::agent_metrics_settings settings_of(std::map<std::string, std::string> vars) {
    auto s = xtel::metrics::agent_metrics_settings::from_env(xtel_test::env_table(std::move(vars)));
    s.hostname = "h";
    return s;
}

/// What `m` serves, in the Prometheus text format, once published.
std::string served(agent_metrics& m) {
    m.publish();
    const std::vector<std::shared_ptr<const xtel::metrics::snapshot>> snaps{m.latest()};
    std::string out;
    CHECK(xtel::metrics::render(snaps, out, xtel::metrics::exposition::text) == 0);
    return out;
}

/// A NIXL transfer as the plug-in's mapping makes its record.
transfer_record nixl_record(direction d,
                            std::uint64_t bytes,
                            std::uint64_t requests,
                            bool timed,
                            std::uint64_t post_us,
                            std::uint64_t xfer_us) {
    transfer_record r;
    r.timestamp_us = 777;
    r.bytes = bytes;
    r.requests = requests;
    r.post_us = timed ? post_us : 0;
    r.xfer_us = timed ? xfer_us : 0;
    r.dir = d;
    r.attrs.op = d == direction::tx ? xtel::transfer_op::write : xtel::transfer_op::read;
    r.timed = timed;
    return r;
}

/// The sampler's settings with spans off: every transfer is summed.
xtel::trace::sampler_settings no_spans() {
    xtel::trace::sampler_settings s;
    s.budget = 0;
    return s;
}

}  // namespace

TEST_CASE("bucket_finder finds the first bound not below a value, as the metric store does") {
    const std::vector<double> bounds = {0.5, 1, 2.5, 10, 4095, 4096, 4097, 1e4, 1e6, 1e9};
    const bucket_finder find(bounds);
    CHECK(find.buckets() == bounds.size() + 1);
    std::vector<std::uint64_t> values;
    for (std::uint64_t v = 0; v < 10050; ++v) {
        values.push_back(v);
    }
    for (const std::uint64_t v :
         std::initializer_list<std::uint64_t>{999'999, 1'000'000, 1'000'001, 999'999'999,
                                              1'000'000'000, 1'000'000'001, UINT64_MAX}) {
        values.push_back(v);
    }
    for (const std::uint64_t v : values) {
        INFO(v);
        const auto first_not_below = static_cast<std::size_t>(
            std::find_if(bounds.begin(), bounds.end(),
                         [&](double b) { return b >= static_cast<double>(v); }) -
            bounds.begin());
        CHECK(find(v) == first_not_below);
    }
}

TEST_CASE("a NIXL flush summed by direction serves exactly what its transfers as records serve") {
    const auto settings = settings_of({{"NIXL_TELEMETRY_METRIC_SET", "both"}});
    agent_metrics by_record("nixl-a", settings);
    agent_metrics by_tally("nixl-a", settings);
    REQUIRE(!by_tally.latency_bounds().empty());
    const xtel::label_table labels;
    flush_tallies tallies;
    tallies.configure(by_tally.latency_bounds(), no_spans(), 1);

    // Two flushes of mixed transfers: both directions, several sizes, some untimed, times on
    // and around the bounds and past the finder's table, a transfer of three requests.
    std::uint64_t seed = 12345;
    const auto next = [&seed](std::uint64_t n) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return (seed >> 33) % n;
    };
    const auto bounds = by_tally.latency_bounds();
    for (int flush = 0; flush < 2; ++flush) {
        std::vector<transfer_record> records;
        for (int i = 0; i < 3000; ++i) {
            const direction d = next(3) == 0 ? direction::rx : direction::tx;
            const std::uint64_t bytes =
                std::array<std::uint64_t, 4>{4096, 65536, 1, 12288}[next(4)];
            const std::uint64_t requests = bytes == 12288 ? 3 : 1;
            const bool timed = next(10) != 0;
            std::uint64_t xfer = next(20000);
            if (next(4) == 0) {
                xfer = static_cast<std::uint64_t>(bounds[next(bounds.size())]);  // on a bound
            }
            const std::uint64_t post = next(3) == 0 ? xfer / 2 : next(60);
            records.push_back(nixl_record(d, bytes, requests, timed, post, xfer));
            bool head_sampled = true;
            REQUIRE(tallies.take(d, bytes, requests, timed, records.back().post_us,
                                 records.back().xfer_us, head_sampled));
            CHECK_FALSE(head_sampled);
        }
        by_record.apply_transfers(records, labels);
        const auto summed = tallies.view(777);
        CHECK(summed.size() == 2);
        by_tally.apply_tallies(summed, labels);
        tallies.clear();
        CHECK(tallies.view(777).empty());
    }
    const std::string expected = served(by_record);
    // What could differ: the histograms' buckets, counts and sums, the totals, the last values.
    CHECK(expected.find("agent_xfer_time_us_bucket") != std::string::npos);
    CHECK(expected.find("xtel_transfer_duration_seconds_bucket") != std::string::npos);
    CHECK(served(by_tally) == expected);
}

TEST_CASE("tallies refuse nothing while off, and the model refuses a tally of the wrong shape") {
    flush_tallies off;
    bool head_sampled = true;
    CHECK_FALSE(off.take(direction::tx, 4096, 1, true, 2, 10, head_sampled));
    CHECK_FALSE(head_sampled);
    CHECK(off.view(1).empty());

    agent_metrics m("nixl-b", settings_of({}));
    const xtel::label_table labels;
    const std::vector<std::uint64_t> too_few(2, 0);
    xtel::transfer_tally t;
    t.transfers = t.requests = t.timed = 1;
    t.bytes = 4096;
    t.xfer_buckets = too_few;
    t.post_buckets = too_few;
    CHECK_THROWS_AS(m.apply_tallies(std::span(&t, 1), labels), xtel::metrics::metrics_error);
}

TEST_CASE("the tallies keep slow transfers and the sampled fraction as records, no others") {
    xtel::trace::sampler_settings s;
    s.slow_us = 1000;
    s.sample = 0.05;
    s.budget = 1000;
    const std::vector<double> bounds = {10, 100, 1000};
    flush_tallies tallies;
    tallies.configure(bounds, s, 42);
    constexpr int fast = 100'000;
    int sampled = 0, slow_records = 0, untimed_records = 0;
    for (int i = 0; i < fast; ++i) {
        bool head_sampled = false;
        if (!tallies.take(direction::tx, 4096, 1, true, 2, 10, head_sampled)) {
            CHECK(head_sampled);
            ++sampled;
        }
        // A slow one travels as a record, not drawn; an untimed one is always summed.
        if (i % 1000 == 0) {
            slow_records +=
                tallies.take(direction::tx, 4096, 1, true, 2, 1000, head_sampled) ? 0 : 1;
            CHECK_FALSE(head_sampled);
            untimed_records +=
                tallies.take(direction::rx, 4096, 1, false, 0, 0, head_sampled) ? 0 : 1;
        }
    }
    CHECK(slow_records == fast / 1000);
    CHECK(untimed_records == 0);
    // 5% of 100,000: 5,000, whose standard deviation is about 69.
    CHECK(std::abs(sampled - 5000) < 350);
    const auto summed = tallies.view(1);
    REQUIRE(summed.size() == 2);
    CHECK(summed[0].transfers == static_cast<std::uint64_t>(fast - sampled));
    CHECK(summed[0].timed == summed[0].transfers);
    CHECK(summed[0].xfer_buckets[0] == summed[0].transfers);  // 10 µs: the first bucket
    CHECK(summed[1].dir == direction::rx);
    CHECK(summed[1].transfers == fast / 1000);
    CHECK(summed[1].timed == 0);

    // All or nothing at the ends of the range.
    s.sample = 1;
    tallies.configure(bounds, s, 7);
    bool head_sampled = false;
    CHECK_FALSE(tallies.take(direction::tx, 1, 1, true, 1, 1, head_sampled));
    CHECK(head_sampled);
    s.sample = 0;
    tallies.configure(bounds, s, 7);
    for (int i = 0; i < 10'000; ++i) {
        REQUIRE(tallies.take(direction::tx, 1, 1, true, 1, 1, head_sampled));
    }
}

}  // namespace nixl_tally_test
