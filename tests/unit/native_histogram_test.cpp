// Native (exponential) histogram buckets in the metric model: where a value goes, how a series'
// buckets stay bounded, the sparse form the wire formats take, and the settings that make them.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/metrics/agent_metrics_settings.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace native_histogram_test {

using namespace xtel::metrics;

namespace {

/// Bucket i's upper bound at `schema`, computed apart from native::upper_bound, in long double.
long double bound_of(std::int32_t i, int schema) {
    return std::pow(2.0L, static_cast<long double>(i) / std::pow(2.0L, schema));
}

family_spec native_family(std::int8_t schema, std::uint8_t decimals = 0) {
    family_spec f{"latency_seconds", "Latency.", metric_type::histogram, {"op"}, decimals};
    f.native = true;
    f.native_schema = schema;
    return f;
}

/// The dense buckets `values` (as kept, > 0) make at `schema` and `decimals`, counted directly.
std::map<std::int32_t, std::uint64_t> counted(const std::vector<std::uint64_t>& values,
                                              int schema,
                                              std::uint8_t decimals) {
    std::map<std::int32_t, std::uint64_t> out;
    for (const std::uint64_t v : values) {
        ++out[native::bucket_index(static_cast<double>(v) / std::pow(10.0, decimals), schema)];
    }
    return out;
}

std::map<std::int32_t, std::uint64_t> buckets_of(const series& s) {
    std::map<std::int32_t, std::uint64_t> out;
    for (std::size_t k = 0; k < s.native_buckets.size(); ++k) {
        if (s.native_buckets[k] != 0) {
            out[s.native_first + static_cast<std::int32_t>(k)] = s.native_buckets[k];
        }
    }
    return out;
}

}  // namespace

TEST_CASE("a value goes in the native bucket whose bounds hold it, at every schema",
          "[native_histogram]") {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> exponent(-30, 30);
    for (int schema = native::min_schema; schema <= native::max_schema; ++schema) {
        INFO("schema " << schema);
        for (int n = 0; n < 2000; ++n) {
            const double v = std::exp2(exponent(rng));
            const std::int32_t i = native::bucket_index(v, schema);
            INFO("value " << v << " index " << i);
            // (base^(i-1), base^i], with a margin of a few ulps for the bound's own rounding.
            CHECK(static_cast<long double>(v) <= bound_of(i, schema) * (1 + 1e-15L));
            CHECK(static_cast<long double>(v) > bound_of(i - 1, schema) * (1 - 1e-15L));
        }
    }
}

TEST_CASE("a power of two ends its native bucket exactly", "[native_histogram]") {
    for (int k = -20; k <= 20; ++k) {
        const double v = std::ldexp(1.0, k);
        for (int schema = 0; schema <= native::max_schema; ++schema) {
            CHECK(native::bucket_index(v, schema) == k * (1 << schema));
            CHECK(native::upper_bound(k * (1 << schema), schema) == v);
        }
        // Coarser than one bucket per power of two: 2^k is in the bucket ending at the next
        // power of 2^(2^-schema) at or above it.
        for (int schema = -1; schema >= native::min_schema; --schema) {
            const int per = 1 << -schema;
            const int expected = k >= 0 ? (k + per - 1) / per : -((-k) / per);
            CHECK(native::bucket_index(v, schema) == expected);
        }
    }
    // Just above a bound is the next bucket: 1 ends bucket 0, the next double starts bucket 1.
    CHECK(native::bucket_index(1.0, 3) == 0);
    CHECK(native::bucket_index(std::nextafter(1.0, 2.0), 3) == 1);
    CHECK(native::bucket_index(std::nextafter(1.0, 0.0), 3) == 0);
}

TEST_CASE("downscaling merges each pair of native buckets into the one holding both",
          "[native_histogram]") {
    // Bucket 2k-1 and 2k at schema s are bucket k at schema s-1: check it on the bounds.
    for (std::int32_t i = -50; i <= 50; ++i) {
        const std::int32_t j = native::downscaled(i);
        CHECK(bound_of(j, 2) >= bound_of(i, 3) * (1 - 1e-15L));
        CHECK(bound_of(j - 1, 2) <= bound_of(i - 1, 3) * (1 + 1e-15L));
    }
    CHECK(native::downscaled(0) == 0);
    CHECK(native::downscaled(-1) == 0);
    CHECK(native::downscaled(-2) == -1);
    CHECK(native::downscaled(1) == 1);
    CHECK(native::downscaled(2) == 1);
    // Several steps at once are the steps one by one, and no index overflows: a node file may
    // hold INT32_MAX, where one step's index + 1 would not fit an int32.
    for (const std::int32_t i : {-1000, -9, -8, -7, -1, 0, 1, 7, 8, 9, 1000}) {
        CHECK(native::downscaled(i, 3) ==
              native::downscaled(native::downscaled(native::downscaled(i))));
    }
    CHECK(native::downscaled(INT32_MAX) == (std::int32_t{1} << 30));
    CHECK(native::downscaled(INT32_MAX, 12) == (std::int32_t{1} << 19));
    CHECK(native::downscaled(INT32_MIN) == -(std::int32_t{1} << 30));
    CHECK(native::downscaled(INT32_MAX, 40) == 1);
}

TEST_CASE("dense buckets brought several schemas down hold what that schema counts directly",
          "[native_histogram]") {
    std::mt19937_64 rng(32);
    std::lognormal_distribution<double> latency(-9.0, 1.5);  // seconds, around 100 us
    std::vector<double> values(500);
    for (double& v : values) {
        v = latency(rng);
    }
    for (const int steps : {1, 2, 5}) {
        CAPTURE(steps);
        std::map<std::int32_t, std::uint64_t> fine, expected;
        for (const double v : values) {
            ++fine[native::bucket_index(v, 6)];
            ++expected[native::bucket_index(v, 6 - steps)];
        }
        const std::int32_t first = fine.begin()->first;
        std::vector<std::uint64_t> dense(static_cast<std::size_t>(fine.rbegin()->first - first + 1),
                                         0);
        for (const auto& [i, n] : fine) {
            dense[static_cast<std::size_t>(i - first)] = n;
        }
        std::vector<std::uint64_t> out{7, 7, 7};  // replaced, not added to
        const std::int32_t low = native::downscale_into(first, dense, steps, out);
        std::map<std::int32_t, std::uint64_t> got;
        for (std::size_t k = 0; k < out.size(); ++k) {
            if (out[k] != 0) {
                got[low + static_cast<std::int32_t>(k)] = out[k];
            }
        }
        CHECK(got == expected);
        CHECK(low == expected.begin()->first);
    }
    // At the int32 end (a node file may hold it): no index overflows on the way.
    const std::vector<std::uint64_t> top{1, 2, 3};
    std::vector<std::uint64_t> out;
    CHECK(native::downscale_into(INT32_MAX - 2, top, 1, out) == (std::int32_t{1} << 30) - 1);
    CHECK(out == std::vector<std::uint64_t>{3, 3});  // (2k-1, 2k) pairs: k = 2^30 - 1, then 2^30
}

TEST_CASE("dense native buckets take Prometheus's sparse form: spans and deltas",
          "[native_histogram]") {
    std::vector<native::bucket_span> spans;
    std::vector<std::int64_t> deltas;
    // Gaps of 2 empty buckets stay inside a span; a gap of 3 starts a new one.
    const std::vector<std::uint64_t> counts{1, 0, 0, 2, 0, 0, 0, 3};
    native::to_spans(-2, counts, spans, deltas);
    CHECK(spans == std::vector<native::bucket_span>{{-2, 4}, {3, 1}});
    CHECK(deltas == std::vector<std::int64_t>{1, -1, 0, 2, 1});
    // Leading and trailing empty buckets are not sent; all empty is no span at all.
    native::to_spans(10, std::vector<std::uint64_t>{0, 0, 5, 4, 0}, spans, deltas);
    CHECK(spans == std::vector<native::bucket_span>{{12, 2}});
    CHECK(deltas == std::vector<std::int64_t>{5, -1});
    native::to_spans(3, std::vector<std::uint64_t>{0, 0}, spans, deltas);
    CHECK(spans.empty());
    CHECK(deltas.empty());
}

TEST_CASE("a native histogram series counts each observation in its bucket, 0 in the zero bucket",
          "[native_histogram]") {
    metric_store s;
    const auto f = s.add_family(native_family(0));
    for (const std::uint64_t v : {0, 1, 2, 3, 4, 5}) {
        s.observe(f, {"read"}, v);
    }
    const series* r = s.find_series("latency_seconds", {"read"});
    REQUIRE(r != nullptr);
    CHECK(r->zero_count == 1);
    CHECK(r->native_schema == 0);
    CHECK(r->native_first == 0);                                         // 1 is in (0.5, 1]
    CHECK(r->native_buckets == std::vector<std::uint64_t>{1, 1, 2, 1});  // 1 | 2 | 3,4 | 5
    CHECK(r->count == 6);
    CHECK(r->sum == 15);
    CHECK(r->buckets.empty());  // no classic bounds: the classic form is +Inf alone
}

TEST_CASE("native buckets are over the value as shown: microseconds kept, seconds shown",
          "[native_histogram]") {
    metric_store s;
    const auto f = s.add_family(native_family(3, 6));
    s.observe(f, {"read"}, 1'000'000);  // 1 s ends bucket 0
    s.observe(f, {"read"}, 500'000);    // 0.5 s ends bucket -8 at 8 per power of two
    s.observe(f, {"read"}, 500'001);    // just above: bucket -7
    const series* r = s.find_series("latency_seconds", {"read"});
    REQUIRE(r != nullptr);
    CHECK(r->native_first == -8);
    CHECK(r->native_buckets == std::vector<std::uint64_t>{1, 1, 0, 0, 0, 0, 0, 0, 1});
}

TEST_CASE("a series whose native buckets would grow too wide halves its resolution",
          "[native_histogram]") {
    metric_store s;
    const auto f = s.add_family(native_family(8));
    s.observe(f, {"read"}, 1);  // bucket 0 at schema 8
    s.observe(f, {"read"}, 2);  // bucket 256: 257 wide, past 160
    const series* r = s.find_series("latency_seconds", {"read"});
    REQUIRE(r != nullptr);
    CHECK(r->native_schema == 7);  // 129 wide at schema 7
    CHECK(r->native_first == 0);
    REQUIRE(r->native_buckets.size() == 129);
    CHECK(r->native_buckets.front() == 1);
    CHECK(r->native_buckets.back() == 1);
}

TEST_CASE("after any observations a series' native buckets are those its final schema counts",
          "[native_histogram]") {
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> exponent(0, 40);  // 1 µs to ~12 days, as kept
    for (int round = 0; round < 20; ++round) {
        metric_store s;
        const auto f = s.add_family(native_family(static_cast<std::int8_t>(round % 9), 6));
        std::vector<std::uint64_t> values;
        const int n = 1 + static_cast<int>(rng() % 500);
        for (int k = 0; k < n; ++k) {
            values.push_back(static_cast<std::uint64_t>(std::exp2(exponent(rng))));
            s.observe(f, {"read"}, values.back());
        }
        const series* r = s.find_series("latency_seconds", {"read"});
        REQUIRE(r != nullptr);
        INFO("round " << round << ", schema " << int(r->native_schema));
        CHECK(r->native_buckets.size() <= native::max_buckets);
        CHECK(buckets_of(*r) == counted(values, r->native_schema, 6));
        CHECK(r->count == values.size());
    }
}

TEST_CASE("native buckets are for histograms, of a schema from -4 to 8", "[native_histogram]") {
    metric_store s;
    family_spec counter{"x_total", "X.", metric_type::counter};
    counter.native = true;
    CHECK_THROWS_WITH(s.add_family(counter),
                      Catch::Contains("expected native buckets only for a histogram"));
    CHECK_THROWS_WITH(s.add_family(native_family(9)), Catch::Contains("of a schema from -4 to 8"));
    CHECK_THROWS_WITH(s.add_family(native_family(-5)), Catch::Contains("schema -5"));
    CHECK_NOTHROW(s.add_family(native_family(-4)));
}

TEST_CASE("NIXL_TELEMETRY_HISTOGRAM_KIND and _SCHEMA shape every latency histogram",
          "[native_histogram][config]") {
    using xtel::metrics::agent_metrics_settings;
    const auto shape = [](std::map<std::string, std::string> vars) {
        return agent_metrics_settings::from_env(xtel_test::env_table(vars)).latency();
    };
    const auto classic = shape({});
    CHECK(!classic.native);
    CHECK(classic.bounds == agent_metrics_settings::default_buckets());
    const auto native = shape({{"NIXL_TELEMETRY_HISTOGRAM_KIND", "Native"}});
    CHECK(native.native);
    CHECK(native.bounds.empty());
    CHECK(native.native_schema == 3);
    const auto both = shape(
        {{"NIXL_TELEMETRY_HISTOGRAM_KIND", "both"}, {"NIXL_TELEMETRY_HISTOGRAM_SCHEMA", "-2"}});
    CHECK(both.native);
    CHECK(both.native_schema == -2);
    CHECK(both.bounds == agent_metrics_settings::default_buckets());

    const auto error_of = [](std::map<std::string, std::string> vars) {
        try {
            agent_metrics_settings::from_env(xtel_test::env_table(vars));
        } catch (const xtel::config_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK_THAT(error_of({{"NIXL_TELEMETRY_HISTOGRAM_KIND", "exponential"}}),
               Catch::StartsWith("NIXL_TELEMETRY_HISTOGRAM_KIND='exponential' is invalid") &&
                   Catch::Contains("expected classic") && Catch::Contains("native") &&
                   Catch::Contains("both"));
    for (const char* bad : {"9", "-5", "", "3.0", "+3", "three", "99999999999"}) {
        INFO(bad);
        CHECK_THAT(error_of({{"NIXL_TELEMETRY_HISTOGRAM_SCHEMA", bad}}),
                   Catch::StartsWith(
                       fmt::format("NIXL_TELEMETRY_HISTOGRAM_SCHEMA='{}' is invalid", bad)) &&
                       Catch::Contains("expected an integer from -4 to 8"));
    }
    CHECK(error_of({{"NIXL_TELEMETRY_HISTOGRAM_SCHEMA", " 8 "}}).empty());
}

}  // namespace native_histogram_test
