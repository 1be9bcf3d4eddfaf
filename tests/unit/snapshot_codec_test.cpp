// The snapshot codec: every snapshot comes back exactly, and anything but an encoding is refused
// with a message that says what is wrong and where.

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace snapshot_codec_test {

using namespace xtel::metrics;
using Catch::Matchers::Contains;

namespace {

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();

/// A counter's or gauge's series.
series value_series(std::vector<std::string> label_values, std::uint64_t value) {
    series s;
    s.label_values = std::move(label_values);
    s.value = value;
    return s;
}

/// Every field of every type set, with values that a codec of the wrong width or byte order
/// would not bring back.
snapshot rich_snapshot() {
    snapshot s;
    s.labels = {{"agent_name", "agent-1"}, {"rank", ""}};

    family_snapshot lat;
    lat.spec = {"a_transfer_seconds",
                "Transfer time.",
                metric_type::histogram,
                {"peer", "op"},
                6,
                {-1.5, 0, 2.5e9, 1e300},
                "seconds",
                false};
    series with_exemplars;
    with_exemplars.label_values = {"Zürich/東京", ""};
    with_exemplars.buckets = {1, 0, max_u64, 7};
    with_exemplars.exemplars = {{"request_id", "req-1", 3, 1'700'000'000'000'000},
                                {"request_id", "", 0, 0},
                                {"trace_id", "✓", max_u64, max_u64},
                                {"", "", 0, 1},
                                {"request_id", "inf", 1ull << 40, 5}};
    // The span the agent wrote for the first: its ids' bytes come back in order.
    for (std::uint8_t i = 0; i < 16; ++i) {
        with_exemplars.exemplars[0].trace_id[i] = static_cast<std::uint8_t>(0xf0 + i);
    }
    with_exemplars.exemplars[0].span_id = {1, 2, 3, 4, 5, 6, 7, 0xff};
    with_exemplars.exemplars[4].trace_id[15] = 1;  // a trace, no span
    with_exemplars.sum = 0x0102030405060708;
    with_exemplars.count = max_u64;
    series without_exemplars;
    without_exemplars.label_values = {"p2", "READ"};
    without_exemplars.buckets = {0, 0, 0, 0};
    lat.series = {with_exemplars, without_exemplars};

    family_snapshot bytes;
    bytes.spec = {"bytes_total", "Bytes moved.\nTwo lines.", metric_type::counter, {"peer"}};
    bytes.series = {value_series({"p1"}, max_u64), value_series({""}, 0),
                    value_series({std::string("\xff\0 raw", 6)}, 42)};

    family_snapshot level;
    level.spec = {"queue_depth", "", metric_type::gauge, {}, 0, {}, "", true};
    level.series = {value_series({}, 12345)};

    family_snapshot post;
    post.spec = {"z_post_seconds", "Post time.", metric_type::summary, {"kind"}, 18, {}, "seconds"};
    series sum_count;
    sum_count.label_values = {"error"};
    sum_count.sum = 99;
    sum_count.count = 3;
    post.series = {sum_count};

    s.families = {lat, bytes, level, post};
    return s;
}

constexpr std::int32_t max_i32 = std::numeric_limits<std::int32_t>::max();
constexpr std::int32_t min_i32 = std::numeric_limits<std::int32_t>::min();

/// A series of a native histogram: buckets from `first` at `schema`, `zero` observations of 0,
/// its count what they add up to (as the store keeps it).
series native_series(std::string label_value,
                     std::int8_t schema,
                     std::int32_t first,
                     std::vector<std::uint64_t> buckets,
                     std::uint64_t zero) {
    series s;
    s.label_values = {std::move(label_value)};
    s.native_schema = schema;
    s.native_first = first;
    s.native_buckets = std::move(buckets);
    s.zero_count = zero;
    s.count = zero;
    for (const auto b : s.native_buckets) {
        s.count += b;
    }
    s.sum = 0x0102030405060708;
    return s;
}

/// Native histograms with every field at values a codec of the wrong width, sign or byte order
/// would not bring back: a native-only family (no bounds: its classic form is +Inf alone) whose
/// series are at its schema, downscaled, at the ends of the int32 indexes, in the zero bucket
/// only, empty and max_buckets wide; and a family with classic bounds too.
snapshot native_snapshot() {
    snapshot s;
    family_snapshot only;
    only.spec = {.name = "a_native_seconds",
                 .help = "Native only.",
                 .type = metric_type::histogram,
                 .label_names = {"peer"},
                 .decimals = 6,
                 .unit = "seconds",
                 .native = true,
                 .native_schema = 8};
    only.series = {native_series("at_schema", 8, -116, {1, 0, 2}, 0),
                   native_series("downscaled", -4, min_i32, {max_u64 - 1}, 1),
                   native_series("top", 1, max_i32 - 1, {5, 6}, 0),
                   native_series("zero_only", 8, 0, {}, 7),
                   native_series("empty", 8, 0, {}, 0),
                   native_series("widest", 3, -80, std::vector<std::uint64_t>(160, 3), 2)};
    only.series[1].exemplars.resize(1);  // one for +Inf, the only classic bucket
    only.series[1].exemplars[0] = {"request_id", "req-9", 12, 34};

    family_snapshot both;
    both.spec = {.name = "b_both_seconds",
                 .help = "Both.",
                 .type = metric_type::histogram,
                 .label_names = {"peer"},
                 .decimals = 6,
                 .bounds = {10, 100},
                 .unit = "seconds",
                 .native = true,
                 .native_schema = -2};
    both.series = {native_series("p1", -2, 3, {4}, 0)};
    both.series[0].buckets = {0, 4};

    family_snapshot classic;
    classic.spec = {.name = "c_classic_seconds",
                    .type = metric_type::histogram,
                    .bounds = {1},
                    .native_schema = 3};  // as a classic family of the agent's is made
    series c;
    c.buckets = {1};
    c.count = 2;
    classic.series = {c};
    s.families = {only, both, classic};
    return s;
}

std::vector<std::byte> encoded(const snapshot& s) {
    std::vector<std::byte> out;
    encode_snapshot(s, out);
    return out;
}

std::vector<std::byte> le_bytes(std::uint64_t v, int n) {
    std::vector<std::byte> out;
    for (int i = 0; i < n; ++i) {
        out.push_back(static_cast<std::byte>(v >> (8 * i)));
    }
    return out;
}

/// Overwrites the first occurrence of `from` in `bytes` with `to` (same size).
void replace_first(std::vector<std::byte>& bytes,
                   const std::vector<std::byte>& from,
                   const std::vector<std::byte>& to) {
    const auto it = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
    REQUIRE(it != bytes.end());
    std::copy(to.begin(), to.end(), it);
}

/// The message decode_snapshot gives for `bytes`; fails the test when it decodes.
std::string refusal(std::span<const std::byte> bytes) {
    try {
        decode_snapshot(bytes);
    } catch (const snapshot_decode_error& e) {
        return e.what();
    }
    FAIL("decoded without an error");
    return {};
}

/// A snapshot of one family and one series, for corrupting one field at a time.
snapshot one_family(family_spec spec, series s) {
    snapshot out;
    out.families = {{std::move(spec), {std::move(s)}}};
    return out;
}

}  // namespace

TEST_CASE("the empty snapshot is the magic the version and two zero counts", "[snapshot_codec]") {
    const auto bytes = encoded(snapshot{});
    std::vector<std::byte> expected = {std::byte{'X'}, std::byte{'S'}, std::byte{'N'},
                                       std::byte{'P'}};
    for (const std::uint64_t v :
         {std::uint64_t{snapshot_codec_version}, std::uint64_t{0}, std::uint64_t{0}}) {
        const auto b = le_bytes(v, 4);
        expected.insert(expected.end(), b.begin(), b.end());
    }
    CHECK(bytes == expected);
    CHECK(decode_snapshot(bytes) == snapshot{});
}

TEST_CASE("a snapshot of every type with exemplars and odd strings comes back exactly",
          "[snapshot_codec]") {
    const snapshot s = rich_snapshot();
    const auto bytes = encoded(s);
    const snapshot back = decode_snapshot(bytes);
    CHECK(back == s);
    // Field by field too, so a failure says which one differs.
    REQUIRE(back.families.size() == 4);
    CHECK(back.labels == s.labels);
    CHECK(back.families[0].spec.bounds == s.families[0].spec.bounds);
    CHECK(back.families[0].series[0].exemplars == s.families[0].series[0].exemplars);
    CHECK(back.families[0].series[0].label_values[0] == "Zürich/東京");
    CHECK(back.families[2].spec.fixed_labels);
    CHECK(back.families[3].spec.decimals == 18);
    CHECK(back.families[3].spec.unit == "seconds");
    CHECK(encoded(back) == bytes);
}

TEST_CASE("encoding into a used buffer replaces what it held", "[snapshot_codec]") {
    std::vector<std::byte> out(100, std::byte{0xee});
    encode_snapshot(rich_snapshot(), out);
    CHECK(out == encoded(rich_snapshot()));
}

TEST_CASE("a snapshot taken from a metric store comes back exactly", "[snapshot_codec]") {
    metric_store store;
    const auto bytes_f =
        store.add_family({"bytes_total", "Bytes.", metric_type::counter, {"peer", "op"}});
    const auto depth = store.add_family({"depth", "Depth.", metric_type::gauge, {}});
    const auto lat = store.add_family({"latency_seconds",
                                       "Latency.",
                                       metric_type::histogram,
                                       {"peer"},
                                       6,
                                       {100, 1000, 10000},
                                       "seconds"});
    const auto post = store.add_family({"post_seconds", "Post.", metric_type::summary, {}, 6});
    const auto errors = store.add_family(
        {"errors_total", "Errors.", metric_type::counter, {"status"}, 0, {}, "", true});
    store.add(bytes_f, {"p1", "WRITE"}, 4096);
    store.add(bytes_f, {"p2", "READ"}, 1);
    store.set(depth, {}, 9);
    store.observe(store.series_of(lat, {"p1"}), 50, exemplar{"request_id", "req-1", 0, 1000});
    store.observe(store.series_of(lat, {"p1"}), 50'000, exemplar{"request_id", "req-2", 0, 2000});
    store.observe(lat, {"p2"}, 700);
    store.observe(post, {}, 12);
    store.add(errors, {"NIXL_ERR_BACKEND"}, 2);

    const snapshot s = take_snapshot(store, {{"agent_name", "a1"}});
    REQUIRE(s.families.size() == 6);  // and the folded-updates family
    CHECK(decode_snapshot(encoded(s)) == s);
}

TEST_CASE("every truncation of an encoding is refused", "[snapshot_codec]") {
    const auto bytes = GENERATE(encoded(rich_snapshot()), encoded(native_snapshot()));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        INFO("prefix of " << n << " of " << bytes.size() << " bytes");
        const std::string what = refusal(std::span(bytes).first(n));
        CHECK_THAT(what, Contains("snapshot payload, byte "));
        CHECK(what.find('\n') == std::string::npos);
    }
}

TEST_CASE("every one-byte change is refused or decodes to what encodes to it", "[snapshot_codec]") {
    const auto bytes = GENERATE(encoded(rich_snapshot()), encoded(native_snapshot()));
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        for (const std::byte flip : {std::byte{0x01}, std::byte{0x80}, std::byte{0xff}}) {
            auto changed = bytes;
            changed[i] ^= flip;
            INFO("byte " << i << " xor " << std::to_integer<int>(flip));
            snapshot decoded;
            try {
                decoded = decode_snapshot(changed);
            } catch (const snapshot_decode_error&) {
                continue;
            }
            CHECK(encoded(decoded) == changed);
        }
    }
}

TEST_CASE("another magic is refused", "[snapshot_codec]") {
    auto bytes = encoded(snapshot{});
    bytes[3] = std::byte{'Q'};
    CHECK_THAT(refusal(bytes), Contains("byte 0: the magic is not \"XSNP\""));
}

TEST_CASE("an unknown version is refused naming the version", "[snapshot_codec]") {
    auto bytes = encoded(rich_snapshot());
    for (const std::uint8_t v : {0, 4}) {
        bytes[4] = std::byte{v};
        CHECK_THAT(refusal(bytes),
                   Contains(fmt::format("byte 4: version {} is unknown: this reader knows "
                                        "versions 1 to 3",
                                        v)));
    }
}

TEST_CASE("a version 1 encoding decodes with no trace or span ids on its exemplars",
          "[snapshot_codec]") {
    // An agent's payload as version 1 wrote it, before exemplars had ids: what an agent built
    // before version 2 publishes to a newer xtel-exporter.
    const auto golden = xtel_test::read_file(std::filesystem::path(XTEL_SOURCE_DIR) / "tests" /
                                             "golden" / "node_payload_v1.bin");
    std::vector<std::byte> bytes(golden.size());
    std::memcpy(bytes.data(), golden.data(), golden.size());
    REQUIRE(bytes.size() > 8);
    CHECK(bytes[4] == std::byte{1});
    const snapshot back = decode_snapshot(bytes);
    std::size_t exemplars = 0;
    for (const auto& f : back.families) {
        for (const auto& x : f.series) {
            for (const auto& e : x.exemplars) {
                exemplars += e.label_value.empty() ? 0 : 1;
                CHECK(e.trace_id == std::array<std::uint8_t, 16>{});
                CHECK(e.span_id == std::array<std::uint8_t, 8>{});
            }
        }
    }
    CHECK(exemplars > 0);
    // Written again, it is version 3 and decodes to the same snapshot.
    const auto again = encoded(back);
    CHECK(again[4] == std::byte{3});
    CHECK(decode_snapshot(again) == back);
}

TEST_CASE("a version 2 encoding decodes with no native buckets", "[snapshot_codec]") {
    // An agent's payload as version 2 wrote it, before native buckets: what an agent built
    // before version 3 publishes to a newer xtel-exporter.
    const auto golden = xtel_test::read_file(std::filesystem::path(XTEL_SOURCE_DIR) / "tests" /
                                             "golden" / "node_payload_v2.bin");
    std::vector<std::byte> bytes(golden.size());
    std::memcpy(bytes.data(), golden.data(), golden.size());
    REQUIRE(bytes.size() > 8);
    CHECK(bytes[4] == std::byte{2});
    const snapshot back = decode_snapshot(bytes);
    std::size_t histograms = 0;
    for (const auto& f : back.families) {
        CHECK_FALSE(f.spec.native);
        CHECK(f.spec.native_schema == 0);
        histograms += f.spec.type == metric_type::histogram ? 1 : 0;
        for (const auto& x : f.series) {
            CHECK(x.native_buckets.empty());
            CHECK(x.native_first == 0);
            CHECK(x.native_schema == 0);
            CHECK(x.zero_count == 0);
        }
    }
    CHECK(histograms > 0);
    // The version 1 golden is the same agent's payload (its node file writes no span, so no
    // exemplar has ids): the same snapshot.
    const auto v1_text = xtel_test::read_file(std::filesystem::path(XTEL_SOURCE_DIR) / "tests" /
                                              "golden" / "node_payload_v1.bin");
    std::vector<std::byte> v1(v1_text.size());
    std::memcpy(v1.data(), v1_text.data(), v1_text.size());
    CHECK(decode_snapshot(v1) == back);
    const auto again = encoded(back);
    CHECK(again[4] == std::byte{3});
    CHECK(decode_snapshot(again) == back);
}

TEST_CASE("native histograms come back exactly: downscaled, zero bucket only and empty series",
          "[snapshot_codec][native]") {
    const snapshot s = native_snapshot();
    const auto bytes = encoded(s);
    const snapshot back = decode_snapshot(bytes);
    CHECK(back == s);
    REQUIRE(back.families.size() == 3);
    const auto& only = back.families[0];
    CHECK(only.spec.native);
    CHECK(only.spec.native_schema == 8);
    CHECK(only.spec.bounds.empty());
    REQUIRE(only.series.size() == 6);
    CHECK(only.series[0].native_first == -116);
    CHECK(only.series[0].native_buckets == std::vector<std::uint64_t>{1, 0, 2});
    CHECK(only.series[1].native_schema == -4);
    CHECK(only.series[1].native_first == min_i32);
    CHECK(only.series[1].native_buckets == std::vector<std::uint64_t>{max_u64 - 1});
    CHECK(only.series[1].zero_count == 1);
    CHECK(only.series[1].count == max_u64);
    CHECK(only.series[2].native_first == max_i32 - 1);
    CHECK(only.series[3].zero_count == 7);
    CHECK(only.series[3].native_buckets.empty());
    CHECK(only.series[4] == s.families[0].series[4]);
    CHECK(only.series[5].native_buckets.size() == native::max_buckets);
    CHECK(back.families[1].spec.native_schema == -2);
    CHECK(back.families[1].series[0].buckets == std::vector<std::uint64_t>{0, 4});
    CHECK_FALSE(back.families[2].spec.native);
    CHECK(back.families[2].spec.native_schema == 3);
    CHECK(encoded(back) == bytes);
}

TEST_CASE("a native histogram from a metric store comes back exactly, downscaled series too",
          "[snapshot_codec][native]") {
    metric_store store;
    const auto lat = store.add_family({.name = "latency_seconds",
                                       .help = "Latency.",
                                       .type = metric_type::histogram,
                                       .label_names = {"peer"},
                                       .decimals = 6,
                                       .unit = "seconds",
                                       .native = true,
                                       .native_schema = 8});
    // 1 us and 1000 s are 30 powers of two apart: 7680 buckets at schema 8, so the series
    // halves its resolution until they fit in 160 (schema 2: 120 buckets).
    store.observe(lat, {"wide"}, 1);
    store.observe(lat, {"wide"}, 1'000'000'000);
    store.observe(lat, {"wide"}, 0);
    store.observe(lat, {"narrow"}, 450);
    store.observe(lat, {"narrow"}, 460);
    store.series_of(lat, {"none"});

    const snapshot s = take_snapshot(store, {{"agent_name", "a1"}});
    const auto f = std::find_if(s.families.begin(), s.families.end(),
                                [](const auto& x) { return x.spec.name == "latency_seconds"; });
    REQUIRE(f != s.families.end());
    REQUIRE(f->series.size() == 3);
    CHECK(f->series[0].native_schema == 2);
    CHECK(f->series[0].zero_count == 1);
    CHECK(f->series[1].native_schema == 8);
    CHECK(f->series[2].native_buckets.empty());
    const snapshot back = decode_snapshot(encoded(s));
    CHECK(back == s);
}

TEST_CASE("a native byte other than 0 or 1 is refused", "[snapshot_codec][native]") {
    auto bytes = encoded(
        one_family({.name = "lat", .type = metric_type::histogram, .native_schema = 3}, {}));
    // magic, version, label count, family count, name (4 + 3), help (4), type, decimals,
    // fixed_labels, unit (4), label name count, bound count: native is at 42, native_schema 43.
    REQUIRE(bytes[42] == std::byte{0});
    REQUIRE(bytes[43] == std::byte{3});
    bytes[42] = std::byte{2};
    CHECK_THAT(refusal(bytes),
               Contains("byte 42: family 0 (\"lat\"): native is 2: expected 0 or 1"));
}

TEST_CASE("native buckets on a family other than a histogram are refused",
          "[snapshot_codec][native]") {
    CHECK_THAT(
        refusal(encoded(one_family(
            {.name = "g", .type = metric_type::gauge, .native = true, .native_schema = 3}, {}))),
        Contains("byte 40: family 0 (\"g\"): native is 1 on a gauge: expected 0 (native "
                 "buckets only for a histogram)"));
}

TEST_CASE("a family native_schema outside -4 to 8 is refused", "[snapshot_codec][native]") {
    for (const int schema : {9, -5, 127, -128}) {
        CHECK_THAT(refusal(encoded(one_family({.name = "lat",
                                               .type = metric_type::histogram,
                                               .native = true,
                                               .native_schema = static_cast<std::int8_t>(schema)},
                                              {}))),
                   Contains(fmt::format("byte 43: family 0 (\"lat\"): native_schema is {}: "
                                        "expected -4 to 8",
                                        schema)));
    }
}

TEST_CASE("a series' native schema above its family's or below -4 is refused",
          "[snapshot_codec][native]") {
    const family_spec spec{.name = "lat",
                           .type = metric_type::histogram,
                           .label_names = {"peer"},
                           .native = true,
                           .native_schema = 3};
    // Downscaling only lowers a series' schema: one above its family's was never made.
    CHECK_THAT(refusal(encoded(one_family(spec, native_series("p", 4, 0, {1}, 0)))),
               Contains("family 0 (\"lat\") series 0: the native schema is 4: expected -4 to 3 "
                        "(the family's native_schema, or lower once downscaled)"));
    CHECK_THAT(refusal(encoded(one_family(spec, native_series("p", -5, 0, {1}, 0)))),
               Contains("series 0: the native schema is -5: expected -4 to 3"));
}

TEST_CASE("more native buckets than max_buckets are refused", "[snapshot_codec][native]") {
    const family_spec spec{.name = "lat",
                           .type = metric_type::histogram,
                           .label_names = {"peer"},
                           .native = true,
                           .native_schema = 3};
    const auto bytes =
        encoded(one_family(spec, native_series("p", 3, 0, std::vector<std::uint64_t>(161, 1), 0)));
    CHECK_THAT(refusal(bytes), Contains("family 0 (\"lat\") series 0: the native bucket count "
                                        "is 161: at most 160 are accepted"));
}

TEST_CASE("native buckets whose last index is past INT32_MAX are refused",
          "[snapshot_codec][native]") {
    const family_spec spec{.name = "lat",
                           .type = metric_type::histogram,
                           .label_names = {"peer"},
                           .native = true,
                           .native_schema = 3};
    CHECK_THAT(refusal(encoded(one_family(spec, native_series("p", 3, max_i32, {1, 1}, 0)))),
               Contains("series 0: native_first is 2147483647 with 2 native buckets: the last "
                        "bucket's index 2147483648 is past 2147483647: expected every index an "
                        "int32"));
    // The last index at INT32_MAX itself is one.
    const auto ends_at_max = one_family(spec, native_series("p", 3, max_i32 - 1, {1, 1}, 0));
    CHECK(decode_snapshot(encoded(ends_at_max)) == ends_at_max);
}

TEST_CASE("native buckets and zero_count that do not add up to the count are refused",
          "[snapshot_codec][native]") {
    const family_spec spec{.name = "lat",
                           .type = metric_type::histogram,
                           .label_names = {"peer"},
                           .native = true,
                           .native_schema = 3};
    series more = native_series("p", 3, -2, {1, 2}, 1);
    more.count = 5;
    CHECK_THAT(refusal(encoded(one_family(spec, more))),
               Contains("series 0: zero_count and the 2 native buckets hold 4 observations: "
                        "expected the series' count, 5"));
    series fewer = native_series("p", 3, -2, {1, 2}, 1);
    fewer.count = 3;
    CHECK_THAT(refusal(encoded(one_family(spec, fewer))),
               Contains("hold 4 observations: expected the series' count, 3"));
    // Buckets that wrap around 2^64 to the count are refused, not added modulo 2^64.
    series wraps = native_series("p", 3, -2, {max_u64, 3}, 0);
    REQUIRE(wraps.count == 2);
    CHECK_THAT(refusal(encoded(one_family(spec, wraps))),
               Contains("series 0: zero_count and the 2 native buckets hold at least 2^64 "
                        "observations: expected the series' count, 2"));
}

TEST_CASE("a type byte past summary is refused naming the family", "[snapshot_codec]") {
    auto bytes = encoded(one_family({"a_total", "h", metric_type::counter, {}}, {}));
    // magic, version, label count, family count, name (4 + 7), help (4 + 1): the type is at 32.
    REQUIRE(bytes[32] == std::byte{0});
    bytes[32] = std::byte{7};
    CHECK_THAT(refusal(bytes), Contains("byte 32: family 0 (\"a_total\"): the type byte is 7: "
                                        "expected 0 (counter), 1 (gauge), 2 (histogram) or 3 "
                                        "(summary)"));
}

TEST_CASE("decimals past 18 and a fixed_labels byte past 1 are refused", "[snapshot_codec]") {
    auto bytes = encoded(one_family({"a_total", "h", metric_type::counter, {}}, {}));
    auto decimals = bytes;
    decimals[33] = std::byte{19};
    CHECK_THAT(refusal(decimals), Contains("byte 33: family 0 (\"a_total\"): decimals is 19"));
    bytes[34] = std::byte{2};
    CHECK_THAT(refusal(bytes), Contains("byte 34: family 0 (\"a_total\"): fixed_labels is 2"));
}

TEST_CASE("bounds that do not increase are refused", "[snapshot_codec]") {
    series s;
    s.buckets = {0, 0, 0};
    auto bytes = encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1, 2, 3}}, s));
    replace_first(bytes, le_bytes(std::bit_cast<std::uint64_t>(2.0), 8),
                  le_bytes(std::bit_cast<std::uint64_t>(0.5), 8));
    CHECK_THAT(refusal(bytes),
               Contains("bound 1 is 0.5 after 1: expected strictly increasing bounds"));

    const double nan = std::numeric_limits<double>::quiet_NaN();
    series one_bucket;
    one_bucket.buckets = {0};
    CHECK_THAT(
        refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {nan}}, one_bucket))),
        Contains("bound 0 is NaN"));
}

TEST_CASE("a count larger than the bytes left can hold is refused before allocating",
          "[snapshot_codec]") {
    auto bytes = encoded(snapshot{});
    // The family count, at byte 12: the limit itself, with nothing after it.
    const auto count = le_bytes(snapshot_codec_limits::max_families, 4);
    std::copy(count.begin(), count.end(), bytes.begin() + 12);
    CHECK_THAT(refusal(bytes), Contains("byte 12: the family count is 65536, but 0 bytes left "
                                        "hold at most 0"));

    series s;
    auto series_bytes = encoded(one_family({"g", "", metric_type::gauge, {}}, s));
    // The series count is the family's last field, 4 bytes before the series (36 bytes).
    const std::size_t at = series_bytes.size() - 36 - 4;
    const auto huge = le_bytes(0xffffffff, 4);
    std::copy(huge.begin(), huge.end(), series_bytes.begin() + static_cast<std::ptrdiff_t>(at));
    CHECK_THAT(refusal(series_bytes),
               Contains("the series count is 4294967295: at most 1048576 are accepted"));
}

TEST_CASE("counts and lengths past the limits are refused naming the limit", "[snapshot_codec]") {
    snapshot many_labels;
    many_labels.labels.resize(65);
    CHECK_THAT(refusal(encoded(many_labels)),
               Contains("byte 8: the label count is 65: at most 64 are accepted"));

    snapshot long_value;
    long_value.labels = {{"agent_name", std::string((1u << 20) + 1, 'x')}};
    CHECK_THAT(refusal(encoded(long_value)),
               Contains("a label's value is 1048577 bytes long: at most 1048576 are accepted"));
}

TEST_CASE("a series with another number of label values than the family's names is refused",
          "[snapshot_codec]") {
    const auto bytes = encoded(one_family({"a_total", "", metric_type::counter, {"peer"}},
                                          value_series({"p1", "extra"}, 1)));
    CHECK_THAT(refusal(bytes), Contains("family 0 (\"a_total\") series 0: the label value count "
                                        "is 2: expected 1 (one per label name)"));
}

TEST_CASE("buckets other than one per bound are refused", "[snapshot_codec]") {
    series s;
    s.buckets = {1};
    CHECK_THAT(refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1, 2}}, s))),
               Contains("series 0: the bucket count is 1: expected 2 (one per bound)"));
    CHECK_THAT(refusal(encoded(one_family({"a_total", "", metric_type::counter, {}}, s))),
               Contains("the bucket count is 1: expected 0 (buckets only for a histogram)"));
}

TEST_CASE("exemplars other than none or one per bucket and +Inf are refused", "[snapshot_codec]") {
    series s;
    s.buckets = {0, 0};
    s.exemplars.resize(2);
    CHECK_THAT(
        refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1, 2}}, s))),
        Contains("the exemplar count is 2: expected 0 or 3 (one per bound and one for +Inf)"));
    series counter;
    counter.exemplars.resize(1);
    CHECK_THAT(refusal(encoded(one_family({"a_total", "", metric_type::counter, {}}, counter))),
               Contains("the exemplar count is 1: expected 0 (exemplars only for a histogram)"));
}

TEST_CASE("bounds on a family other than a histogram are refused", "[snapshot_codec]") {
    CHECK_THAT(refusal(encoded(one_family({"g", "", metric_type::gauge, {}, 0, {1}}, {}))),
               Contains("the bound count is 1: expected 0 (bounds only for a histogram, this is "
                        "a gauge)"));
}

TEST_CASE("families out of name order or named twice are refused", "[snapshot_codec]") {
    snapshot s;
    s.families = {{{"b_total", "", metric_type::counter, {}}, {{}}},
                  {{"a_total", "", metric_type::counter, {}}, {{}}}};
    CHECK_THAT(refusal(encoded(s)), Contains("family 1 (\"a_total\"): the name does not sort "
                                             "after family 0's \"b_total\""));
    s.families[1].spec.name = "b_total";
    CHECK_THAT(refusal(encoded(s)), Contains("family 1 (\"b_total\"): the name does not sort"));
}

TEST_CASE("bytes after the last family are refused", "[snapshot_codec]") {
    auto bytes = encoded(rich_snapshot());
    const std::size_t end = bytes.size();
    bytes.push_back(std::byte{0});
    CHECK_THAT(refusal(bytes), Contains("byte " + std::to_string(end) +
                                        ": 1 bytes after the last family: expected the end"));
}

TEST_CASE("a family name that is not a metric name is refused and quoted as one printable line",
          "[snapshot_codec]") {
    // A newline would have written lines of the payload's choosing into /metrics.
    CHECK_THAT(refusal(encoded(one_family({"a\nb\"\xff", "", metric_type::counter, {}}, {}))),
               Contains("byte 16: family 0: the name \"a\\x0ab\\\"\\xff\" is not a metric name: "
                        "expected [a-zA-Z_:][a-zA-Z0-9_:]*"));
    for (const std::string name : {"", "1st_total", "a b", "a-b", "é"}) {
        INFO(name);
        CHECK_THAT(refusal(encoded(one_family({name, "", metric_type::gauge, {}}, {}))),
                   Contains("is not a metric name"));
    }
    CHECK(decode_snapshot(encoded(one_family({":a_b:9", "", metric_type::gauge, {}}, {})))
              .families[0]
              .spec.name == ":a_b:9");
}

TEST_CASE("a counter whose name does not end in _total is refused", "[snapshot_codec]") {
    CHECK_THAT(refusal(encoded(one_family({"bytes", "", metric_type::counter, {}}, {}))),
               Contains("byte 16: family 0 (\"bytes\"): the name \"bytes\" of a counter does not "
                        "end in _total"));
}

TEST_CASE("a family label name that is not a label name is refused naming it", "[snapshot_codec]") {
    for (const std::string name : {"peer name", "__name__", "9th", "a:b", ""}) {
        INFO(name);
        CHECK_THAT(refusal(encoded(one_family({"a_total", "", metric_type::counter, {"op", name}},
                                              value_series({"r", "x"}, 1)))),
                   Contains("family 0 (\"a_total\"): label name 1 \"" + name +
                            "\" is not a label name: expected [a-zA-Z_][a-zA-Z0-9_]*, not "
                            "starting with __"));
    }
}

TEST_CASE("a family label that every series carries already is refused", "[snapshot_codec]") {
    // pid: the reader adds the writer's; two of one name would fail the whole scrape.
    for (const std::string name : {"agent_name", "pid", "rank", "local_rank", "instance"}) {
        INFO(name);
        CHECK_THAT(refusal(encoded(one_family({"a_total", "", metric_type::counter, {name}},
                                              value_series({"x"}, 1)))),
                   Contains("label name 0 \"" + name + "\" is reserved"));
    }
}

TEST_CASE("le in a histogram and quantile in a summary are refused", "[snapshot_codec]") {
    series h;
    h.label_values = {"1"};
    h.buckets = {0};
    CHECK_THAT(refusal(encoded(one_family({"lat", "", metric_type::histogram, {"le"}, 0, {1}}, h))),
               Contains("label name 0 \"le\" is refused in a histogram"));
    series q;
    q.label_values = {"0.5"};
    CHECK_THAT(refusal(encoded(one_family({"lat", "", metric_type::summary, {"quantile"}}, q))),
               Contains("label name 0 \"quantile\" is refused in a summary"));
    // Elsewhere they are ordinary names.
    CHECK(decode_snapshot(encoded(one_family({"g", "", metric_type::gauge, {"le", "quantile"}},
                                             value_series({"a", "b"}, 1))))
              .families[0]
              .spec.label_names.size() == 2);
}

TEST_CASE("a family label name given twice is refused", "[snapshot_codec]") {
    CHECK_THAT(
        refusal(encoded(one_family({"a_total", "", metric_type::counter, {"op", "peer", "op"}},
                                   value_series({"r", "p", "w"}, 1)))),
        Contains("label name 2 \"op\" is label name 0's too: expected each name once"));
}

TEST_CASE("a snapshot label other than agent_name or rank or local_rank is refused",
          "[snapshot_codec]") {
    for (const std::string name : {"pid", "instance", "hostname", "agent name", ""}) {
        INFO(name);
        snapshot s;
        s.labels = {{"agent_name", "a"}, {name, "1"}};
        CHECK_THAT(refusal(encoded(s)),
                   Contains("label 1's name \"" + name +
                            "\" is refused: expected agent_name, rank or local_rank"));
    }
    snapshot all;
    all.labels = {{"local_rank", "0"}, {"rank", "3"}, {"agent_name", "a"}};
    CHECK(decode_snapshot(encoded(all)) == all);
}

TEST_CASE("a snapshot label given twice is refused", "[snapshot_codec]") {
    snapshot s;
    s.labels = {{"agent_name", "a"}, {"agent_name", "b"}};
    // magic, version, label count: label 1 starts after label 0's name and value (4 + 10, 4 + 1).
    CHECK_THAT(refusal(encoded(s)), Contains("byte 31: label 1's name \"agent_name\" is label 0's "
                                             "too: expected each label once"));
}

TEST_CASE("a unit that is not letters, digits and underscores is refused", "[snapshot_codec]") {
    // A newline would have ended the OpenMetrics body early with a `# EOF` of its own.
    CHECK_THAT(refusal(encoded(
                   one_family({"a_seconds", "", metric_type::gauge, {}, 0, {}, "seconds\n# EOF"},
                              value_series({}, 1)))),
               Contains("the unit \"seconds\\x0a# EOF\" is not a unit: expected [a-zA-Z0-9_]*"));
}

TEST_CASE("a unit that does not end the family's name is refused", "[snapshot_codec]") {
    CHECK_THAT(
        refusal(encoded(one_family({"a_seconds", "", metric_type::gauge, {}, 0, {}, "bytes"},
                                   value_series({}, 1)))),
        Contains("the unit \"bytes\" does not end the name: expected a name ending in _bytes"));
    CHECK_THAT(refusal(encoded(one_family({"abytes", "", metric_type::gauge, {}, 0, {}, "bytes"},
                                          value_series({}, 1)))),
               Contains("does not end the name"));
    CHECK_THAT(refusal(encoded(one_family({"a_total", "", metric_type::counter, {}, 0, {}, "total"},
                                          value_series({}, 1)))),
               Contains("expected a name ending in _total (before _total)"));
    // A counter's unit comes before its _total.
    CHECK(decode_snapshot(
              encoded(one_family({"a_bytes_total", "", metric_type::counter, {}, 0, {}, "bytes"},
                                 value_series({}, 1))))
              .families[0]
              .spec.unit == "bytes");
}

TEST_CASE("an exemplar label name that is not a label name is refused", "[snapshot_codec]") {
    series s;
    s.buckets = {0};
    s.exemplars = {{"", "", 0, 0}, {"request id", "r-1", 5, 6}};
    CHECK_THAT(refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1}}, s))),
               Contains("series 0: exemplar 1's label name \"request id\" is not a label name"));
    s.exemplars[1].label_name = "__trace";
    CHECK_THAT(refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1}}, s))),
               Contains("exemplar 1's label name \"__trace\" is not a label name"));
    // A value without a name is refused too: a bucket without an exemplar has neither.
    s.exemplars[1] = {"", "r-1", 5, 6};
    CHECK_THAT(refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1}}, s))),
               Contains("exemplar 1's label name \"\" is not a label name"));
}

TEST_CASE("infinite bounds are refused: readers add +Inf themselves", "[snapshot_codec]") {
    const double inf = std::numeric_limits<double>::infinity();
    series s;
    s.buckets = {0, 0};
    CHECK_THAT(
        refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {1, inf}}, s))),
        Contains("bound 1 is inf: expected finite bounds"));
    CHECK_THAT(
        refusal(encoded(one_family({"lat", "", metric_type::histogram, {}, 0, {-inf, 1}}, s))),
        Contains("bound 0 is -inf: expected finite bounds"));
}

TEST_CASE("bounds that are one number once divided by 10^decimals are refused",
          "[snapshot_codec]") {
    // Shown in seconds, 1e-320 and 2e-320 µs both underflow to 0: two buckets with le="0".
    series s;
    s.buckets = {0, 0};
    CHECK_THAT(
        refusal(encoded(
            one_family({"lat_seconds", "", metric_type::histogram, {}, 6, {1e-320, 2e-320}}, s))),
        Contains("bound 1 is 2e-320 after 1e-320: divided by 10^6 as shown, both are 0: expected "
                 "bounds that differ as shown"));
}

TEST_CASE("two series of one family with the same label values are refused naming both",
          "[snapshot_codec]") {
    snapshot s = one_family({"a_total", "", metric_type::counter, {"op", "peer"}},
                            value_series({"read", "p1"}, 1));
    auto& series = s.families[0].series;
    series.push_back(value_series({"read", "p2"}, 2));
    series.push_back(value_series({"read", "p1"}, 3));
    series.push_back(value_series({"read", "p2"}, 4));
    const auto bytes = encoded(s);
    // Each series is 4 + (4 + 4) + (4 + 2) + 24 + 4 + 4 = 50 bytes; series 2 is before the last.
    CHECK_THAT(refusal(bytes),
               Contains("byte " + std::to_string(bytes.size() - 2 * 50) +
                        ": family 0 (\"a_total\") series 2: the label values (\"read\", \"p1\") "
                        "are series 0's too"));
    // Without labels, a family has one series at most.
    snapshot bare = one_family({"g", "", metric_type::gauge, {}}, value_series({}, 1));
    bare.families[0].series.push_back(value_series({}, 2));
    CHECK_THAT(refusal(encoded(bare)), Contains("series 1: the label values () are series 0's"));
}

TEST_CASE("two series whose label values differ only in bytes that are not UTF-8 are refused",
          "[snapshot_codec]") {
    // Found by fuzz_snapshot_codec: each invalid byte is shown as U+FFFD, so both are r\uFFFDad.
    snapshot s = one_family({"a_total", "", metric_type::counter, {"op"}}, value_series({"r\x95"
                                                                                         "ad"},
                                                                                        1));
    s.families[0].series.push_back(value_series({"r\xe5"
                                                 "ad"},
                                                2));
    CHECK_THAT(refusal(encoded(s)),
               Contains("series 1: the label values (\"r\\xe5ad\") are series 0's too, as readers "
                        "show them (bytes that are not UTF-8 as U+FFFD)"));
    // Valid UTF-8 that differs is two series.
    s.families[0].series[0].label_values = {
        "r\xc3\xa9"
        "ad"};
    s.families[0].series[1].label_values = {
        "r\xc3\xa8"
        "ad"};
    CHECK(decode_snapshot(encoded(s)) == s);
}

TEST_CASE("two families that would write lines of one name are refused", "[snapshot_codec]") {
    series h;
    h.buckets = {0};
    snapshot s;
    s.families = {{{"a", "", metric_type::histogram, {}, 0, {1}}, {h}},
                  {{"a_count", "", metric_type::gauge, {}}, {value_series({}, 7)}}};
    CHECK_THAT(refusal(encoded(s)), Contains("family 1 (\"a_count\"): its line \"a_count\" is "
                                             "family 0's (\"a\") too"));
}

TEST_CASE("families the store takes decode, with every name the rules allow", "[snapshot_codec]") {
    // The store's own checks are the decoder's: a family the store takes always decodes.
    metric_store store({.max_series = 10, .reserved_labels = {"agent_name"}});
    const auto f = store.add_family({"xtel_transfer_time_seconds_total",
                                     "h",
                                     metric_type::counter,
                                     {"op", "le", "quantile"},
                                     6,
                                     {},
                                     "seconds"});
    store.add(f, {"read", "1", "0.5"}, 5);
    const auto lat = store.add_family(
        {"lat_seconds", "h", metric_type::histogram, {"peer"}, 6, {1, 10, 1e15}, "seconds"});
    store.observe(store.series_of(lat, {"p"}), 3, exemplar{"request_id", "r", 0, 9});
    const snapshot s = take_snapshot(store, {{"agent_name", "a"}, {"rank", "0"}});
    CHECK(decode_snapshot(encoded(s)) == s);
}

}  // namespace snapshot_codec_test
