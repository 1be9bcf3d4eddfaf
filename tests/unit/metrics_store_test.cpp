#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "xtel/metrics/metric_store.hpp"

namespace metrics_store_test {

using namespace xtel::metrics;

namespace {

family_spec peers_family() {
    return {"bytes_by_peer_total", "Bytes by peer.", metric_type::counter, {"peer", "op"}};
}

}  // namespace

TEST_CASE("a counter adds per label set and a gauge keeps the last level") {
    metric_store s;
    const auto c = s.add_family(peers_family());
    const auto g = s.add_family({"queue_depth", "Depth.", metric_type::gauge, {"queue"}});
    s.add(c, {"a", "read"}, 10);
    s.add(c, {"a", "read"}, 5);
    s.add(c, {"a", "write"}, 7);
    s.set(g, {"q1"}, 4);
    s.set(g, {"q1"}, 2);
    CHECK(s.value("bytes_by_peer_total", {"a", "read"}) == 15u);
    CHECK(s.value("bytes_by_peer_total", {"a", "write"}) == 7u);
    CHECK(s.value("bytes_by_peer_total", {"b", "read"}) == std::nullopt);
    CHECK(s.value("queue_depth", {"q1"}) == 2u);
    CHECK(s.find("bytes_by_peer_total")->all_series().size() == 2);
}

TEST_CASE(
    "adding the same family twice gives the same id and another spec of its name is refused") {
    metric_store s;
    const auto a = s.add_family(peers_family());
    CHECK(s.add_family(peers_family()) == a);
    auto other = peers_family();
    other.label_names = {"peer"};
    CHECK_THROWS_WITH(s.add_family(other),
                      Catch::Contains("'bytes_by_peer_total' is already defined as a counter with "
                                      "labels [peer,op]"));
}

TEST_CASE("past the series limit new label sets fold into one overflow series and are counted") {
    metric_store s(store_options{.max_series = 2});
    const auto f = s.add_family(peers_family());
    s.add(f, {"a", "read"}, 1);
    s.add(f, {"b", "read"}, 2);
    s.add(f, {"c", "read"}, 4);   // folded
    s.add(f, {"d", "write"}, 8);  // folded
    s.add(f, {"a", "read"}, 16);  // an existing series still takes its updates
    s.add(f, {"c", "read"}, 32);  // folded again: "c" never got a series of its own
    CHECK(s.value("bytes_by_peer_total", {"a", "read"}) == 17u);
    CHECK(s.value("bytes_by_peer_total", {"b", "read"}) == 2u);
    CHECK(s.value("bytes_by_peer_total", {"other", "other"}) == 44u);
    CHECK(s.value("bytes_by_peer_total", {"c", "read"}) == std::nullopt);
    CHECK(s.find("bytes_by_peer_total")->all_series().size() == 3);
    CHECK(s.find("bytes_by_peer_total")->folded() == 3);
    CHECK(s.value(metric_store::folded_family, {"bytes_by_peer_total"}) == 3u);
}

TEST_CASE("every family with labels has its folded-updates series from the start, at 0") {
    metric_store s;
    s.add_family(peers_family());
    s.add_family({"plain_total", "No labels.", metric_type::counter, {}});
    const auto* folded = s.find(metric_store::folded_family);
    REQUIRE(folded != nullptr);
    REQUIRE(folded->all_series().size() == 1);
    CHECK(folded->all_series()[0].label_values == std::vector<std::string>{"bytes_by_peer_total"});
    CHECK(folded->all_series()[0].value == 0);
    CHECK(s.families().front().spec().name == metric_store::folded_family);
}

TEST_CASE("a family of fixed labels is exempt from the series limit and has no folded series") {
    metric_store s(store_options{.max_series = 2});
    family_spec kinds{"errors_total", "Errors by kind.", metric_type::counter, {"kind"}};
    kinds.fixed_labels = true;
    const auto f = s.add_family(kinds);
    for (const char* k : {"busy", "not_found", "timed_out", "backend_error"}) {
        s.add(f, {k}, 1);
    }
    CHECK(s.find("errors_total")->all_series().size() == 4);
    CHECK(s.value("errors_total", {"backend_error"}) == 1u);
    CHECK(s.value("errors_total", {"other"}) == std::nullopt);
    CHECK(s.find("errors_total")->folded() == 0);
    CHECK(s.value(metric_store::folded_family, {"errors_total"}) == std::nullopt);
    // A family of peers beside it still folds.
    const auto p = s.add_family(peers_family());
    for (const char* peer : {"a", "b", "c"}) {
        s.add(p, {peer, "read"}, 1);
    }
    CHECK(s.value(metric_store::folded_family, {"bytes_by_peer_total"}) == 1u);
}

TEST_CASE("label values that differ only in where they split are different series") {
    metric_store s;
    const auto f = s.add_family(peers_family());
    s.add(f, {"ab", "c"}, 1);
    s.add(f, {"a", "bc"}, 2);
    CHECK(s.value("bytes_by_peer_total", {"ab", "c"}) == 1u);
    CHECK(s.value("bytes_by_peer_total", {"a", "bc"}) == 2u);
}

TEST_CASE("the store refuses bad families and label values with messages that say why") {
    metric_store s(store_options{.reserved_labels = {"agent_name", "hostname"}});
    CHECK_THROWS_WITH(s.add_family({"bytes", "h", metric_type::counter, {}}),
                      Catch::Contains("'bytes' is invalid: expected a name ending in _total"));
    CHECK_THROWS_WITH(s.add_family({"1bytes_total", "h", metric_type::counter, {}}),
                      Catch::Contains("[a-zA-Z_:][a-zA-Z0-9_:]*"));
    CHECK_THROWS_WITH(s.add_family({"x_total", "h", metric_type::counter, {"a", "a"}}),
                      Catch::Contains("label 'a' of metric family 'x_total' is repeated"));
    CHECK_THROWS_WITH(s.add_family({"x_total", "h", metric_type::counter, {"a-b"}}),
                      Catch::Contains("label 'a-b'"));
    CHECK_THROWS_WITH(s.add_family({"x_total", "h", metric_type::counter, {"hostname"}}),
                      Catch::Contains("label 'hostname' of metric family 'x_total' is reserved"));
    const auto f = s.add_family({"x_total", "h", metric_type::counter, {"a"}});
    CHECK_THROWS_WITH(s.add(f, {"1", "2"}, 1),
                      Catch::Contains("'x_total' was given 2 label values: expected 1"));
    CHECK_THROWS_AS(metric_store(store_options{.max_series = 0}), metrics_error);
}

TEST_CASE("a store's check can refuse a family before it is added") {
    metric_store s(store_options{.check = [](const family_spec& spec) {
        if (spec.name == "taken_total") {
            throw metrics_error("taken");
        }
    }});
    CHECK_THROWS_WITH(s.add_family({"taken_total", "h", metric_type::counter, {}}), "taken");
    CHECK(s.find("taken_total") == nullptr);
    CHECK_NOTHROW(s.add_family({"free_total", "h", metric_type::counter, {}}));
}

TEST_CASE("every update and every new family changes the store's change count") {
    metric_store s;
    const auto before = s.changes();
    const auto f = s.add_family({"x_total", "h", metric_type::counter, {}});
    const auto added = s.changes();
    s.add(f, {}, 0);
    CHECK(added > before);
    CHECK(s.changes() > added);
}

TEST_CASE("a histogram counts each observation in the first bucket whose bound holds it") {
    metric_store s;
    const auto h = s.add_family(
        {"latency", "Latency in us.", metric_type::histogram, {"op"}, 0, {10, 100, 1000}});
    // 10 is in le=10 (bounds are inclusive), 11 and 100 in le=100, 5000 above every bound.
    for (const std::uint64_t v : {3, 10, 11, 100, 5000}) {
        s.observe(h, {"read"}, v);
    }
    const series* r = s.find_series("latency", {"read"});
    REQUIRE(r != nullptr);
    CHECK(r->buckets == std::vector<std::uint64_t>{2, 2, 0});
    CHECK(r->sum == 5124);
    CHECK(r->count == 5);
    CHECK(s.value("latency", {"read"}) == std::nullopt);  // a histogram has no single value
}

TEST_CASE("a histogram's bucket is the first bound not below the value, at every magnitude") {
    // Bounds dense and sparse, fractional and huge: several in one power of two (16, 20, 24,
    // 31.5), none for many (1e3 to 1e15), one just under a power of two and one at it.
    const std::vector<double> bounds = {0.5, 1, 16, 20, 24, 31.5, 32, 1000, 1e15, 0x1p63};
    metric_store s;
    const auto h =
        s.add_family({"spread", "Values in us.", metric_type::histogram, {"v"}, 0, bounds});
    std::set<std::uint64_t> values = {0,
                                      1,
                                      2,
                                      15,
                                      16,
                                      17,
                                      19,
                                      20,
                                      21,
                                      24,
                                      25,
                                      31,
                                      32,
                                      33,
                                      999,
                                      1000,
                                      1001,
                                      1'000'000'000'000'000,
                                      1'000'000'000'000'001,
                                      UINT64_MAX};
    for (std::uint64_t w = 1; w < 64; ++w) {
        values.insert((std::uint64_t{1} << w) - 1);  // each value once: a series each
        values.insert(std::uint64_t{1} << w);
    }
    for (const std::uint64_t v : values) {
        const std::string name = std::to_string(v);
        s.observe(h, {name}, v);
        const series* got = s.find_series("spread", {name});
        REQUIRE(got != nullptr);
        // Where lower_bound over the bounds puts it (past the last: +Inf, no classic bucket).
        const auto want = static_cast<std::size_t>(
            std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(v)) -
            bounds.begin());
        std::vector<std::uint64_t> expected(bounds.size(), 0);
        if (want < bounds.size()) {
            expected[want] = 1;
        }
        INFO("value " << v);
        CHECK(got->buckets == expected);
    }
}

TEST_CASE("observations added as bucket counts leave a series as observing each value would") {
    metric_store s;
    const auto h =
        s.add_family({"latency", "h", metric_type::histogram, {"way"}, 0, {10, 100, 1000}});
    const auto one_by_one = s.series_of(h, {"one by one"});
    const auto counted = s.series_of(h, {"counted"});
    const std::uint64_t values[] = {3, 10, 11, 100, 5000, 7, 999, 20000};
    std::vector<std::uint64_t> counts(4, 0);
    std::uint64_t sum = 0;
    for (const std::uint64_t v : values) {
        s.observe(one_by_one, v);
        ++counts[s.bucket_index(counted, v)];
        sum += v;
    }
    const auto before = s.changes();
    s.add_observations(counted, counts, sum);
    CHECK(s.changes() > before);
    const series* a = s.find_series("latency", {"one by one"});
    const series* b = s.find_series("latency", {"counted"});
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(b->buckets == std::vector<std::uint64_t>{3, 2, 1});
    CHECK(b->buckets == a->buckets);
    CHECK(b->sum == 26130);
    CHECK(b->count == 8);
    CHECK(b->count == a->count);
}

TEST_CASE("observations as bucket counts are refused where each value is needed or sizes differ") {
    metric_store s;
    const auto c = s.add_family({"c_total", "h", metric_type::counter, {}});
    const auto h = s.add_family({"h", "h", metric_type::histogram, {}, 0, {1, 2}});
    family_spec native{"n", "h", metric_type::histogram, {}, 0, {1, 2}};
    native.native = true;
    const auto n = s.add_family(native);
    const std::vector<std::uint64_t> three = {1, 0, 1};
    CHECK_THROWS_WITH(s.add_observations(s.series_of(c, {}), three, 5),
                      Catch::Contains("'c_total' (counter)"));
    CHECK_THROWS_WITH(s.add_observations(s.series_of(n, {}), three, 5),
                      Catch::Contains("'n' (histogram, native)"));
    CHECK_THROWS_WITH(s.add_observations(s.series_of(h, {}), std::vector<std::uint64_t>{1, 1}, 5),
                      Catch::Contains("with 2 bucket counts") && Catch::Contains("and 3 counts"));
    s.add_observations(s.series_of(h, {}), three, 5);
    CHECK(s.find_series("h", {})->buckets == std::vector<std::uint64_t>{1, 0});
    CHECK(s.find_series("h", {})->count == 2);
}

TEST_CASE("a histogram keeps the latest exemplar of each bucket beside its counts") {
    metric_store s;
    const auto h =
        s.add_family({"latency", "Latency in us.", metric_type::histogram, {"op"}, 0, {10, 100}});
    const auto r = s.series_of(h, {"read"});
    s.observe(r, 50, exemplar{"request_id", "req-1", 0, 1000});
    s.observe(r, 60, exemplar{"request_id", "req-2", 0, 2000});   // replaces req-1: same bucket
    s.observe(r, 5, exemplar{"request_id", "", 0, 3000});         // no id: nothing kept
    s.observe(r, 500, exemplar{"request_id", "req-3", 0, 4000});  // above every bound: +Inf
    const series* x = s.find_series("latency", {"read"});
    REQUIRE(x != nullptr);
    CHECK(x->buckets == std::vector<std::uint64_t>{1, 2});
    CHECK(x->count == 4);
    REQUIRE(x->exemplars.size() == 3);
    CHECK(x->exemplars[0] == exemplar{});
    CHECK(x->exemplars[1] == exemplar{"request_id", "req-2", 60, 2000});
    CHECK(x->exemplars[2] == exemplar{"request_id", "req-3", 500, 4000});
}

TEST_CASE("an exemplar given to a summary is not kept") {
    metric_store s;
    const auto f = s.add_family({"sizes", "Sizes.", metric_type::summary, {}});
    const auto r = s.series_of(f, {});
    s.observe(r, 7, exemplar{"request_id", "req-1", 0, 1});
    const series* x = s.find_series("sizes", {});
    REQUIRE(x != nullptr);
    CHECK(x->count == 1);
    CHECK(x->exemplars.empty());
}

TEST_CASE("a summary keeps the sum and count of its observations, without buckets") {
    metric_store s;
    const auto f = s.add_family({"app_latency", "h", metric_type::summary, {}});
    const auto ref = s.series_of(f, {});
    s.observe(ref, 40);
    s.observe(ref, 2);
    const series* x = s.find_series("app_latency", {});
    REQUIRE(x != nullptr);
    CHECK(x->buckets.empty());
    CHECK(x->sum == 42);
    CHECK(x->count == 2);
}

TEST_CASE("past the series limit a histogram's observations fold into its overflow series") {
    metric_store s(store_options{.max_series = 1});
    const auto h = s.add_family({"latency", "h", metric_type::histogram, {"peer"}, 0, {1, 10}});
    s.observe(h, {"a"}, 1);
    s.observe(h, {"b"}, 5);   // folded
    s.observe(h, {"c"}, 50);  // folded
    s.observe(h, {"a"}, 7);
    CHECK(s.find_series("latency", {"a"})->buckets == std::vector<std::uint64_t>{1, 1});
    const series* other = s.find_series("latency", {"other"});
    REQUIRE(other != nullptr);
    CHECK(other->buckets == std::vector<std::uint64_t>{0, 1});
    CHECK(other->sum == 55);
    CHECK(other->count == 2);
    CHECK(s.find("latency")->all_series().size() == 2);
    CHECK(s.value(metric_store::folded_family, {"latency"}) == 2u);
}

TEST_CASE("histogram bounds must increase, belong to histograms, and le is not a label") {
    metric_store s;
    CHECK_THROWS_WITH(s.add_family({"h1", "h", metric_type::histogram, {}, 0, {10, 10}}),
                      Catch::Contains("expected strictly increasing bounds"));
    CHECK_THROWS_WITH(s.add_family({"g1", "h", metric_type::gauge, {}, 0, {10}}),
                      Catch::Contains("expected bounds only for a histogram"));
    CHECK_THROWS_WITH(s.add_family({"h2", "h", metric_type::histogram, {"le"}, 0, {10}}),
                      Catch::Contains("label 'le' of metric family 'h2' is invalid"));
}

TEST_CASE("histogram bounds must be finite and differ once divided by 10^decimals") {
    metric_store s;
    const double inf = std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH(s.add_family({"h1", "h", metric_type::histogram, {}, 0, {10, inf}}),
                      Catch::Contains("expected strictly increasing bounds, finite"));
    CHECK_THROWS_WITH(s.add_family({"h2", "h", metric_type::histogram, {}, 0, {-inf}}),
                      Catch::Contains("expected strictly increasing bounds, finite"));
    CHECK_THROWS_WITH(
        s.add_family(
            {"h3", "h", metric_type::histogram, {}, 0, {std::numeric_limits<double>::quiet_NaN()}}),
        Catch::Contains("expected strictly increasing bounds, finite"));
    // Both are 0 in seconds: one le twice.
    CHECK_THROWS_WITH(s.add_family({"h4", "h", metric_type::histogram, {}, 6, {1e-320, 2e-320}}),
                      Catch::Contains("still increasing divided by 10^6"));
    CHECK_NOTHROW(s.add_family({"h5", "h", metric_type::histogram, {}, 6, {1e-300, 2e-300}}));
}

TEST_CASE("a unit is letters and digits and underscores and ends the family's name") {
    metric_store s;
    CHECK_THROWS_WITH(s.add_family({"a_seconds", "h", metric_type::gauge, {}, 0, {}, "sec onds"}),
                      Catch::Contains("metric family 'a_seconds' has the unit 'sec onds': expected "
                                      "[a-zA-Z0-9_]* that ends the name"));
    CHECK_THROWS_WITH(s.add_family({"a_seconds", "h", metric_type::gauge, {}, 0, {}, "bytes"}),
                      Catch::Contains("has the unit 'bytes'"));
    CHECK_NOTHROW(s.add_family({"b_bytes_total", "h", metric_type::counter, {}, 0, {}, "bytes"}));
    CHECK_NOTHROW(s.add_family({"c_bytes", "h", metric_type::gauge, {}, 0, {}, "bytes"}));
}

TEST_CASE("quantile is not a label of a summary") {
    metric_store s;
    CHECK_THROWS_WITH(s.add_family({"sm", "h", metric_type::summary, {"quantile"}}),
                      Catch::Contains("label 'quantile' of metric family 'sm' is invalid"));
    CHECK_NOTHROW(s.add_family({"g", "h", metric_type::gauge, {"quantile"}}));
}

TEST_CASE("a family whose lines would take another family's line names is refused") {
    metric_store s;
    s.add_family({"latency", "h", metric_type::histogram, {}, 0, {10}});
    CHECK_THROWS_WITH(s.add_family({"latency_count", "h", metric_type::gauge, {}}),
                      Catch::Contains("its line name 'latency_count' is used by family 'latency'"));
    s.add_family({"depth_sum", "h", metric_type::gauge, {}});
    CHECK_THROWS_WITH(s.add_family({"depth", "h", metric_type::summary, {}}),
                      Catch::Contains("'depth_sum' is used by family 'depth_sum'"));
    CHECK(s.owner_of_line("latency_bucket") == s.find("latency"));
}

TEST_CASE("each kind of update is refused on a family of the other kind") {
    metric_store s;
    const auto c = s.add_family({"c_total", "h", metric_type::counter, {}});
    const auto h = s.add_family({"h", "h", metric_type::histogram, {}, 0, {1}});
    CHECK_THROWS_WITH(s.observe(c, {}, 1), Catch::Contains("'c_total' is a counter"));
    CHECK_THROWS_WITH(s.add(h, {}, 1), Catch::Contains("'h' is a histogram"));
    CHECK_THROWS_WITH(s.set(h, {}, 1), Catch::Contains("'h' is a histogram"));
}

}  // namespace metrics_store_test
