// xtel top's computation, apart from the terminal: what it reads from a snapshot, rates from
// two readings, percentiles from bucket counts, sorting, the name filter, units, and the frame
// laid out in the widths given.

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "top_options.hpp"
#include "top_view.hpp"

namespace top_view_test {

using namespace xtel::top;
using xtel::metrics::family_snapshot;
using xtel::metrics::metric_type;
using xtel::metrics::snapshot;

namespace {

family_snapshot counter(std::string name,
                        std::vector<std::string> labels,
                        std::vector<std::pair<std::vector<std::string>, std::uint64_t>> values) {
    family_snapshot f;
    f.spec.name = std::move(name);
    f.spec.type = metric_type::counter;
    f.spec.label_names = std::move(labels);
    for (auto& [label_values, v] : values) {
        xtel::metrics::series s;
        s.label_values = std::move(label_values);
        s.value = v;
        f.series.push_back(std::move(s));
    }
    return f;
}

/// A histogram kept as the agents keep xtel_transfer_duration_seconds: microseconds, shown in
/// seconds (decimals 6), so its bounds are in microseconds.
family_snapshot histogram(std::string name,
                          std::uint8_t decimals,
                          std::vector<double> bounds,
                          std::vector<std::vector<std::uint64_t>> series_buckets) {
    family_snapshot f;
    f.spec.name = std::move(name);
    f.spec.type = metric_type::histogram;
    f.spec.decimals = decimals;
    f.spec.bounds = std::move(bounds);
    f.spec.label_names = {"op"};
    for (auto& buckets : series_buckets) {
        xtel::metrics::series s;
        s.label_values = {"write"};
        for (const auto b : buckets) {
            s.count += b;
        }
        buckets.resize(f.spec.bounds.size());
        s.buckets = std::move(buckets);
        f.series.push_back(std::move(s));
    }
    return f;
}

/// A series of a native histogram: `buckets` from index `first` at `schema`, `zero`
/// observations of 0.
xtel::metrics::series native_series(std::string op,
                                    std::int8_t schema,
                                    std::int32_t first,
                                    std::vector<std::uint64_t> buckets,
                                    std::uint64_t zero = 0) {
    xtel::metrics::series s;
    s.label_values = {std::move(op)};
    s.native_schema = schema;
    s.native_first = first;
    s.zero_count = zero;
    s.count = zero;
    for (const auto b : buckets) {
        s.count += b;
    }
    s.native_buckets = std::move(buckets);
    return s;
}

/// A latency histogram that keeps native buckets only (no bounds: its classic form is +Inf
/// alone), of schema `schema`, kept in microseconds and shown in seconds (decimals 6).
family_snapshot native_histogram(std::string name,
                                 std::int8_t schema,
                                 std::vector<xtel::metrics::series> series) {
    family_snapshot f;
    f.spec.name = std::move(name);
    f.spec.type = metric_type::histogram;
    f.spec.decimals = 6;
    f.spec.label_names = {"op"};
    f.spec.native = true;
    f.spec.native_schema = schema;
    f.series = std::move(series);
    return f;
}

/// A native histogram's latency as an agent's snapshot gives it.
latency_histogram native_latency_of(family_snapshot f) {
    snapshot s;
    s.labels = {{"agent_name", "n"}, {"pid", "1"}};
    s.families.push_back(std::move(f));
    return sample_of(s).latency;
}

snapshot sorted(snapshot s) {
    std::sort(s.families.begin(), s.families.end(),
              [](const auto& a, const auto& b) { return a.spec.name < b.spec.name; });
    return s;
}

/// An agent's snapshot as the collector hands it over (agent_name, rank, pid).
snapshot agent_snapshot() {
    snapshot s;
    s.labels = {{"agent_name", "prefill-0"}, {"rank", "3"}, {"pid", "4242"}};
    s.families.push_back(counter("agent_tx_bytes_total", {"hostname"}, {{{"n1"}, 13107200}}));
    s.families.push_back(counter("agent_rx_bytes_total", {"hostname"}, {{{"n1"}, 65536}}));
    s.families.push_back(counter("agent_tx_requests_num_total", {"hostname"}, {{{"n1"}, 200}}));
    s.families.push_back(counter("agent_rx_requests_num_total", {"hostname"}, {{{"n1"}, 1}}));
    s.families.push_back(counter("xtel_errors_total", {"kind"},
                                 {{{"busy"}, 0}, {{"timed_out"}, 3}, {{"not_found"}, 1}}));
    s.families.push_back(counter("xtel_telemetry_events_dropped_total", {}, {{{}, 7}}));
    // Two series (op, peer) of one family, added up: 1 + 2 in the 10 us bucket, 4 above every
    // bound.
    s.families.push_back(
        histogram("xtel_transfer_duration_seconds", 6, {10, 25, 50}, {{1, 0, 0, 2}, {2, 0, 0, 2}}));
    return sorted(std::move(s));
}

sample sample_with(std::string name, std::uint64_t pid, std::uint64_t tx) {
    sample s;
    s.name = std::move(name);
    s.pid = pid;
    s.tx_bytes = tx;
    return s;
}

row row_named(std::string name, std::optional<double> tx_rate, std::uint64_t pid = 1) {
    row r;
    r.name = std::move(name);
    r.pid = pid;
    r.tx_rate = tx_rate;
    r.initiated = true;
    return r;
}

std::vector<std::string> names(const std::vector<row>& rows) {
    std::vector<std::string> out;
    for (const auto& r : rows) {
        out.push_back(r.name);
    }
    return out;
}

const auto t0 = clock::time_point{} + std::chrono::hours(1);

}  // namespace

TEST_CASE("xtel top reads an agent's counters labels and latency buckets from its snapshot",
          "[top]") {
    const auto s = sample_of(agent_snapshot(), writer_state::closed, t0);
    CHECK(s.name == "prefill-0");
    CHECK(s.pid == 4242);
    CHECK(s.rank == 3u);
    CHECK(s.state == writer_state::closed);
    CHECK(s.tx_bytes == 13107200);
    CHECK(s.rx_bytes == 65536);
    CHECK(s.transfers == 201);
    CHECK(s.dropped == 7);
    CHECK(s.errors == std::vector<std::pair<std::string, std::uint64_t>>{
                          {"busy", 0}, {"timed_out", 3}, {"not_found", 1}});
    // Bounds kept in microseconds (decimals 6) read as seconds.
    CHECK(s.latency.bounds == std::vector<double>{10e-6, 25e-6, 50e-6});
    CHECK(s.latency.buckets == std::vector<std::uint64_t>{3, 0, 0});
    CHECK(s.latency.count == 7);
}

TEST_CASE("xtel top adds up xtel's successful transfers when NIXL's counters are off", "[top]") {
    snapshot s;
    s.labels = {{"agent_name", "a"}, {"pid", "9"}};
    s.families.push_back(counter("xtel_transfer_bytes_total", {"direction", "status"},
                                 {{{"tx", "success"}, 1000},
                                  {{"tx", "timed_out"}, 64},
                                  {{"rx", "success"}, 500},
                                  {{"tx", "success"}, 24}}));
    s.families.push_back(counter("xtel_transfer_requests_total", {"direction", "status"},
                                 {{{"tx", "success"}, 3}, {{"rx", "success"}, 2}}));
    s.families.push_back(histogram("agent_xfer_time_us", 0, {10, 100}, {{0, 1}}));
    const auto got = sample_of(sorted(s));
    CHECK(got.tx_bytes == 1024);
    CHECK(got.rx_bytes == 500);
    CHECK(got.transfers == 5);
    CHECK_FALSE(got.rank);
    // agent_xfer_time_us is in microseconds: its bounds too.
    CHECK(got.latency.bounds == std::vector<double>{10e-6, 100e-6});
}

TEST_CASE("xtel top reads the memory an agent registered and its peers from the xtel families",
          "[top]") {
    snapshot s;
    s.labels = {{"agent_name", "t"}, {"pid", "9"}};
    auto memory = counter("xtel_memory_registered_bytes", {}, {{{}, 3 << 20}});
    memory.spec.type = metric_type::gauge;
    auto peers = counter("xtel_connections", {}, {{{}, 2}});
    peers.spec.type = metric_type::gauge;
    s.families.push_back(memory);
    s.families.push_back(peers);
    // NIXL's cumulative families, which the xtel family wins over.
    s.families.push_back(counter("agent_memory_registered_total", {"hostname"}, {{{"n1"}, 9}}));
    s.families.push_back(counter("agent_memory_deregistered_total", {"hostname"}, {{{"n1"}, 1}}));
    const auto got = sample_of(sorted(s));
    CHECK(got.memory == 3u << 20);
    CHECK(got.peers == 2u);
    CHECK(got.transfers == 0);
}

TEST_CASE("xtel top takes registered memory from NIXL's totals when the xtel set is off", "[top]") {
    snapshot s;
    s.labels = {{"agent_name", "t"}, {"pid", "9"}};
    s.families.push_back(
        counter("agent_memory_registered_total", {"hostname"}, {{{"n1"}, 5 << 20}}));
    s.families.push_back(
        counter("agent_memory_deregistered_total", {"hostname"}, {{{"n1"}, 1 << 20}}));
    const auto got = sample_of(sorted(s));
    CHECK(got.memory == 4u << 20);
    CHECK_FALSE(got.peers);  // NIXL's set has no connection family
    CHECK_FALSE(sample_of(snapshot{}).memory);
}

TEST_CASE("xtel top counts an agent as initiating once it completed a transfer of its own",
          "[top]") {
    sample target = sample_with("t", 1, 0);
    target.memory = 1 << 20;
    CHECK_FALSE(make_row(target, nullptr, {}, t0).initiated);
    sample reader = sample_with("r", 1, 0);
    reader.rx_bytes = 4096;
    CHECK(make_row(reader, nullptr, {}, t0).initiated);
    sample counted = sample_with("c", 1, 0);
    counted.transfers = 1;  // a transfer of 0 bytes still is one
    CHECK(make_row(counted, nullptr, {}, t0).initiated);
}

TEST_CASE("xtel top's rates are the counters' change between two readings over the time between",
          "[top]") {
    sample before = sample_with("a", 7, 1000);
    before.rx_bytes = 50;
    before.transfers = 10;
    sample now = sample_with("a", 7, 1000 + 4096);
    now.rx_bytes = 50;
    now.transfers = 18;
    const auto r = make_row(now, &before, std::chrono::duration<double>(2.0), t0);
    CHECK(r.tx_rate == 2048.0);
    CHECK(r.rx_rate == 0.0);
    CHECK(r.transfer_rate == 4.0);
    CHECK(r.tx_bytes == 5096);
}

TEST_CASE("xtel top gives no rate for a first reading a new pid or a counter that went back",
          "[top]") {
    const sample now = sample_with("a", 7, 100);
    CHECK_FALSE(make_row(now, nullptr, std::chrono::duration<double>(1.0), t0).tx_rate);
    const sample other_pid = sample_with("a", 8, 50);
    CHECK_FALSE(make_row(now, &other_pid, std::chrono::duration<double>(1.0), t0).tx_rate);
    const sample more = sample_with("a", 7, 200);
    CHECK_FALSE(make_row(now, &more, std::chrono::duration<double>(1.0), t0).tx_rate);
}

TEST_CASE("xtel top pairs each reading with the previous one of the same agent and pid", "[top]") {
    rate_tracker t;
    CHECK_FALSE(t.update({sample_with("a", 1, 0), sample_with("b", 2, 0)}, t0)[0].tx_rate);
    const auto rows = t.update({sample_with("a", 1, 3000), sample_with("b", 3, 100)},
                               t0 + std::chrono::milliseconds(500));
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].tx_rate == 6000.0);
    CHECK_FALSE(rows[1].tx_rate);  // b restarted: a new process
}

TEST_CASE("xtel top interpolates a quantile within the bucket it falls in", "[top]") {
    const std::vector<double> bounds = {10, 25, 50, 100};
    // All ten in (10, 25]: the median half way, p99 at 99% of the way.
    CHECK(quantile(0.5, bounds, {0, 10, 0, 0}, 10) == 17.5);
    CHECK(quantile(0.99, bounds, {0, 10, 0, 0}, 10) == Approx(24.85).epsilon(1e-12));
    // The first bucket starts at 0.
    CHECK(quantile(0.5, bounds, {4, 0, 0, 0}, 4) == 5.0);
    // 100 observations: 50 in the first bucket, 40 in the second, 10 in the third.
    CHECK(quantile(0.5, bounds, {50, 40, 10, 0}, 100) == 10.0);
    CHECK(quantile(0.9, bounds, {50, 40, 10, 0}, 100) == 25.0);
    CHECK(quantile(0.99, bounds, {50, 40, 10, 0}, 100) == Approx(47.5).epsilon(1e-12));
    // Above every bound: the highest bound, as histogram_quantile answers.
    CHECK(quantile(0.99, bounds, {1, 0, 0, 0}, 10) == 100.0);
    CHECK_FALSE(quantile(0.5, bounds, {0, 0, 0, 0}, 0));
    CHECK_FALSE(quantile(0.5, {}, {}, 5));
}

TEST_CASE("xtel top takes latency quantiles from native buckets when the family has no bounds",
          "[top]") {
    // Schema 0: bucket i holds (2^(i-1), 2^i] seconds. Series of one family at schemas 1 and
    // 0 are added at 0: at schema 1 buckets -40 and -39, (2^-20.5, 2^-20] and (2^-20,
    // 2^-19.5], are in buckets -20 and -19 at schema 0.
    snapshot s;
    s.labels = {{"agent_name", "n"}, {"pid", "1"}};
    s.families.push_back(native_histogram(
        "xtel_transfer_duration_seconds", 1,
        {native_series("write", 1, -40, {3, 1}), native_series("read", 0, -19, {4, 2})}));
    const sample got = sample_of(s);
    const auto& h = got.latency;
    REQUIRE(h.native);
    CHECK(h.bounds.empty());
    CHECK(h.native->schema == 0);
    CHECK(h.native->buckets == std::map<std::int32_t, std::uint64_t>{{-20, 3}, {-19, 5}, {-18, 2}});
    CHECK(h.count == 10);
    // 10 observations: 3 in (2^-21, 2^-20], 5 in (2^-20, 2^-19], 2 in (2^-19, 2^-18]. The
    // median is the 5th: 2 of 5 into the second bucket; p99 the 9.9th, 0.95 of the third's.
    CHECK(quantile(0.5, h) == Approx(0x1p-20 * 1.4).epsilon(1e-12));
    CHECK(quantile(0.99, h) == Approx(0x1p-19 * 1.95).epsilon(1e-12));
    // The lowest bucket from its own lower bound, not from 0.
    CHECK(quantile(0.1, h) == Approx(0x1p-21 + 0x1p-21 / 3).epsilon(1e-12));

    const auto r = make_row(got, nullptr, {}, t0);
    CHECK(r.p50 == Approx(0x1p-20 * 1.4).epsilon(1e-12));
    CHECK(r.latency_since_start);
}

TEST_CASE("xtel top reads NIXL's native latency in microseconds and the zero bucket as 0",
          "[top]") {
    // agent_xfer_time_us shows microseconds: bucket 7 at schema 0 is (64, 128] us.
    auto f = native_histogram("agent_xfer_time_us", 0, {native_series("write", 0, 7, {2})});
    f.spec.decimals = 0;
    const auto h = native_latency_of(f);
    REQUIRE(h.native);
    CHECK(h.native->per_second == 1e6);
    CHECK(quantile(0.5, h) == Approx(96e-6).epsilon(1e-12));
    // Six of ten observations were 0: the median is 0, p99 in (64, 128] us.
    const auto zeros = native_latency_of(native_histogram("xtel_transfer_duration_seconds", 0,
                                                          {native_series("write", 0, 7, {4}, 6)}));
    CHECK(quantile(0.5, zeros) == 0.0);
    CHECK(quantile(0.99, zeros) == Approx(64 + 64 * 0.975).epsilon(1e-12));
    // No observation: no quantile.
    const auto empty = native_latency_of(
        native_histogram("xtel_transfer_duration_seconds", 3, {native_series("write", 3, 0, {})}));
    CHECK_FALSE(quantile(0.5, empty));
}

TEST_CASE("xtel top brings native buckets at the ends of the int32 indexes to a lower schema",
          "[top]") {
    // A node file may hold bucket INT32_MAX; at one schema down it is bucket 2^30, and
    // INT32_MIN is -2^30 (ceil of half), with nothing wrapping around.
    const auto h = native_latency_of(
        native_histogram("xtel_transfer_duration_seconds", 3,
                         {native_series("write", 3, std::numeric_limits<std::int32_t>::max(), {1}),
                          native_series("read", 3, std::numeric_limits<std::int32_t>::min(), {2}),
                          native_series("other", 2, 0, {4})}));
    REQUIRE(h.native);
    CHECK(h.native->schema == 2);
    CHECK(h.native->buckets ==
          std::map<std::int32_t, std::uint64_t>{{-(1 << 30), 2}, {0, 4}, {1 << 30, 1}});
    CHECK(h.count == 7);
}

TEST_CASE("xtel top takes native latency from the buckets' growth, across a downscale", "[top]") {
    sample before = sample_with("a", 1, 0);
    before.latency = native_latency_of(native_histogram("xtel_transfer_duration_seconds", 1,
                                                        {native_series("write", 1, -40, {3})}));
    sample now = before;
    // Since, the series' buckets grew past 160 wide and it went down to schema 0: its 3
    // earlier observations are in bucket -20 there, the 2 new ones in (2^-19, 2^-18].
    now.latency = native_latency_of(native_histogram("xtel_transfer_duration_seconds", 1,
                                                     {native_series("write", 0, -20, {3, 0, 2})}));
    const auto r = make_row(now, &before, std::chrono::duration<double>(1.0), t0);
    CHECK_FALSE(r.latency_since_start);
    CHECK(r.p50 == Approx(0x1p-19 * 1.5).epsilon(1e-12));
    // A bucket that went back (another process, or a restart): not an interval's growth.
    now.latency = native_latency_of(native_histogram("xtel_transfer_duration_seconds", 1,
                                                     {native_series("write", 0, -19, {5})}));
    CHECK_FALSE(growth(now.latency, before.latency));
    CHECK(make_row(now, &before, std::chrono::duration<double>(1.0), t0).latency_since_start);
}

TEST_CASE("xtel top takes latency from the buckets' growth over the interval", "[top]") {
    sample before = sample_with("a", 1, 0);
    before.latency = {{10, 25, 50, 100}, {100, 0, 0, 0}, 100};
    sample now = before;
    now.latency.buckets = {100, 0, 4, 0};
    now.latency.count = 104;
    const auto r = make_row(now, &before, std::chrono::duration<double>(1.0), t0);
    // The four new observations are in (25, 50]; the hundred older ones do not count.
    CHECK(r.p50 == 37.5);
    CHECK(r.p99 == Approx(49.75).epsilon(1e-12));
    CHECK_FALSE(r.latency_since_start);
}

TEST_CASE("xtel top takes latency from the whole histogram when nothing was timed in the interval",
          "[top]") {
    sample s = sample_with("a", 1, 0);
    s.latency = {{10, 25, 50, 100}, {100, 0, 4, 0}, 104};
    const auto r = make_row(s, &s, std::chrono::duration<double>(1.0), t0);
    CHECK(r.latency_since_start);
    CHECK(r.p50 == 5.2);
    const auto none = make_row(sample_with("b", 1, 0), nullptr, {}, t0);
    CHECK_FALSE(none.p50);
    CHECK_FALSE(none.latency_since_start);
}

TEST_CASE(
    "xtel top lists the kinds with errors the most first and how old a dead writer's numbers are",
    "[top]") {
    sample s = sample_with("a", 1, 0);
    s.errors = {{"busy", 1}, {"not_found", 0}, {"timed_out", 5}};
    s.state = writer_state::dead;
    s.last_published = t0;
    const auto r = make_row(s, nullptr, {}, t0 + std::chrono::milliseconds(12'700));
    CHECK(r.errors ==
          std::vector<std::pair<std::string, std::uint64_t>>{{"timed_out", 5}, {"busy", 1}});
    CHECK(r.errors_total == 6);
    CHECK(r.stale_for == std::chrono::seconds(12));
}

TEST_CASE("xtel top sorts rates down names up and missing values last", "[top]") {
    std::vector<row> rows = {row_named("b", 10.0), row_named("a", std::nullopt),
                             row_named("c", 30.0), row_named("d", 10.0)};
    sort_rows(rows, column::tx_rate, false);
    CHECK(names(rows) == std::vector<std::string>{"c", "b", "d", "a"});
    sort_rows(rows, column::tx_rate, true);
    CHECK(names(rows) == std::vector<std::string>{"b", "d", "c", "a"});
    sort_rows(rows, column::agent, false);
    CHECK(names(rows) == std::vector<std::string>{"a", "b", "c", "d"});
    sort_rows(rows, column::agent, true);
    CHECK(names(rows) == std::vector<std::string>{"d", "c", "b", "a"});
}

TEST_CASE("xtel top sorts rows of one name by pid and states live then closed then dead", "[top]") {
    std::vector<row> rows = {row_named("x", 1.0, 30), row_named("x", 1.0, 20)};
    rows[0].state = writer_state::dead;
    sort_rows(rows, column::tx_rate, false);
    CHECK(rows[0].pid == 20);
    sort_rows(rows, column::state, false);
    CHECK(rows[0].state == writer_state::live);
    CHECK(rows[1].state == writer_state::dead);
}

TEST_CASE("xtel top's name filter is a shell pattern or a part of the name", "[top]") {
    CHECK(name_matches("", "anything"));
    CHECK(name_matches("demo-*", "demo-initiator"));
    CHECK_FALSE(name_matches("demo-*", "xdemo-initiator"));
    CHECK(name_matches("*-target", "demo-target"));
    CHECK(name_matches("d?mo*", "demo-1"));
    CHECK(name_matches("rank[0-3]", "rank2"));
    CHECK_FALSE(name_matches("rank[0-3]", "rank4"));
    CHECK(name_matches("rank[!0-3]", "rank4"));
    CHECK(name_matches("a*b*c", "aXXbYYbZc"));
    CHECK_FALSE(name_matches("a*b*c", "aXXbYYbZ"));
    CHECK(name_matches("init", "demo-initiator"));
    CHECK_FALSE(name_matches("init", "demo-target"));
    CHECK(name_matches("x\\*", "x*"));
    CHECK_FALSE(name_matches("x\\*", "xy"));
    CHECK(name_matches("a[b", "a[b"));  // no closing bracket: an ordinary [
}

TEST_CASE("xtel top's units keep three significant digits in at most seven characters", "[top]") {
    CHECK(format_bytes(0) == "0B");
    CHECK(format_bytes(1023) == "1023B");
    CHECK(format_bytes(1024) == "1.00KiB");
    CHECK(format_bytes(1536) == "1.50KiB");
    CHECK(format_bytes(13107200) == "12.5MiB");
    CHECK(format_bytes(1000.0 * 1024) == "1000KiB");
    CHECK(format_bytes(1023.6 * 1024) == "1.00MiB");
    CHECK(format_bytes(123.0 * (1 << 30)) == "123GiB");
    CHECK(format_count(0) == "0");
    CHECK(format_count(7.5) == "7.5");
    CHECK(format_count(9999) == "9999");
    CHECK(format_count(12345) == "12.3k");
    CHECK(format_count(1.5e6) == "1.50M");
    CHECK(format_seconds(850e-9) == "850ns");
    CHECK(format_seconds(17.5e-6) == "17.5us");
    CHECK(format_seconds(1.25e-3) == "1.25ms");
    CHECK(format_seconds(2) == "2.00s");
    for (const double v : {0.0, 1.0, 999.9, 1023.4, 1e3, 1e6, 1e9, 1e12, 1e15, 1e18, 1e20}) {
        CHECK(format_bytes(v).size() <= 7);
        CHECK(format_count(v).size() <= 7);
    }
}

namespace {

row full_row(std::string name) {
    row r = row_named(std::move(name), 1.5 * 1024 * 1024, 4242);
    r.rank = 3;
    r.rx_rate = 0;
    r.transfer_rate = 24;
    r.p50 = 17.5e-6;
    r.p99 = 24.85e-6;
    r.tx_bytes = 13107200;
    r.rx_bytes = 65536;
    r.memory = 64 << 20;
    r.peers = 2;
    r.errors = {{"timed_out", 3}};
    r.errors_total = 3;
    return r;
}

frame_options frame_for(std::size_t width = 0, std::size_t height = 0) {
    frame_options o;
    o.dir = "/dev/shm";
    o.time = "12:00:00";
    o.width = width;
    o.height = height;
    return o;
}

}  // namespace

TEST_CASE("xtel top lines the cells up under their headers", "[top]") {
    const auto f = format_frame({full_row("prefill-0"), full_row("decode-12")}, frame_for());
    REQUIRE(f.lines.size() == 6);
    CHECK(f.lines[0] ==
          "xtel top  12:00:00  /dev/shm  every 1s  agents 2: 2 live, 0 closed, 0 dead  sort tx");
    CHECK(f.lines[1] ==
          "total  tx 25.0MiB (26214400 B)  rx 128KiB (131072 B)  mem 128MiB (134217728 B)  "
          "tx/s 3.00MiB  rx/s 0B  xfers/s 48  errors timed_out:6  dropped 0");
    CHECK(f.lines[2].empty());
    CHECK(f.header_line == 3);
    CHECK(f.lines[3] ==
          "AGENT         PID RANK STATE          TX/s     RX/s XFERS/s      P50      "
          "P99 TX TOTAL RX TOTAL      MEM PEERS DROPPED ERRORS");
    CHECK(f.lines[4] ==
          "decode-12    4242    3 live        1.50MiB       0B      24  17.5us   "
          "24.9us   12.5MiB  64.0KiB  64.0MiB     2       0 timed_out:3");
    // The sorted column's header, for the terminal to highlight.
    CHECK(f.lines[3].substr(f.sort_begin, f.sort_end - f.sort_begin) == "    TX/s");
}

TEST_CASE("xtel top shows a target's memory and peers and no bytes it cannot see", "[top]") {
    row target = row_named("decode-0-target", 0.0, 77);
    target.initiated = false;
    target.rx_rate = 0;
    target.transfer_rate = 0;
    target.memory = 3 << 20;
    target.peers = 0;
    const auto f = format_frame({full_row("decode-0-initiator"), target}, frame_for());
    REQUIRE(f.lines.size() == 7);
    CHECK(f.lines[5] ==
          "decode-0-target         77    - live              -        -       -        -        "
          "-        -        -  3.00MiB     0       0 -");
    // Every right-aligned cell of the target's row ends where its header does: its "-" under
    // P50 and P99 stood one column left of the others'.
    const std::string& header = f.lines[3];
    for (const char* name : {"PID", "RANK", "TX/s", "RX/s", "XFERS/s", "P50", "P99", "TX TOTAL",
                             "RX TOTAL", "MEM", "PEERS", "DROPPED"}) {
        const auto end = header.find(name) + std::string_view(name).size();
        INFO(name << " ends at column " << end);
        CHECK(f.lines[5][end - 1] != ' ');
        CHECK(f.lines[5][end] == ' ');
    }
    // The initiator's bytes only; the target's memory in the memory total.
    CHECK(
        f.lines[1].starts_with("total  tx 12.5MiB (13107200 B)  rx 64.0KiB (65536 B)  "
                               "mem 67.0MiB (70254592 B)"));
    CHECK(f.lines[6] ==
          "- under TX and RX: no transfer of its own; peers read and write its memory (MEM) "
          "one-sided, unseen by it");
    // Sorted by bytes sent, a target is last either way: it has no such number.
    auto o = frame_for();
    o.sort = column::tx_total;
    o.reverse = true;
    const auto reversed = format_frame({target, full_row("decode-0-initiator")}, o);
    CHECK(reversed.lines[4].starts_with("decode-0-initiator "));
}

TEST_CASE("xtel top cuts a frame to the terminal's width and height", "[top]") {
    std::vector<row> rows;
    for (int i = 0; i < 30; ++i) {
        rows.push_back(full_row("agent-" + std::to_string(i)));
    }
    auto o = frame_for(40, 12);
    o.interactive = true;
    const auto f = format_frame(rows, o);
    REQUIRE(f.lines.size() == 12);
    for (const auto& line : f.lines) {
        CHECK(line.size() <= 40);
    }
    // 4 lines above the table's rows, 2 below (the message and the keys): 6 rows, the last
    // saying how many more there are.
    CHECK(f.lines[9] == "... 25 more (f filters by name)");
    CHECK(f.lines[11] == "q quit  s/S sort column  r reverse  f or");
    CHECK(f.sort_end <= 40);
}

TEST_CASE("xtel top cuts a long name and shows bytes that are not printable as question marks",
          "[top]") {
    const auto f =
        format_frame({full_row(std::string(40, 'n') + "\x1b[2J"), full_row("a\tb")}, frame_for());
    for (const auto& line : f.lines) {
        CHECK(line.find('\x1b') == std::string::npos);
        CHECK(line.find('\t') == std::string::npos);
    }
    // Sorted by name (the rates are equal): "a\tb" first.
    CHECK(f.lines[4].starts_with("a?b" + std::string(29, ' ') + "    4242"));
    CHECK(f.lines[5].starts_with(std::string(31, 'n') + "~    4242"));
}

TEST_CASE("xtel top says when there are no agents or none matches the filter", "[top]") {
    const auto empty = format_frame({}, frame_for());
    CHECK(empty.lines.back().starts_with("no agents: no node file in /dev/shm"));
    auto o = frame_for();
    o.filter = "zzz";
    const auto none = format_frame({full_row("a"), full_row("b")}, o);
    CHECK(none.lines.back() == "no agent matches the filter 'zzz' (2 hidden)");
    CHECK(none.lines[0].ends_with("filter 'zzz' (2 hidden)"));
    CHECK(none.lines[1].starts_with("total  tx 0B (0 B)  rx 0B (0 B)"));
    CHECK(none.lines[1].find("errors -  dropped 0") != std::string::npos);
}

TEST_CASE("xtel top's totals line sums only the agents the filter shows", "[top]") {
    auto o = frame_for();
    o.filter = "pre*";
    auto other = full_row("decode-0");
    other.tx_bytes = 1;
    const auto f = format_frame({full_row("prefill-0"), other}, o);
    CHECK(f.lines[1].starts_with(
        "total  tx 12.5MiB (13107200 B)  rx 64.0KiB (65536 B)  mem 64.0MiB (67108864 B)  "
        "tx/s 1.50MiB"));
    CHECK(f.lines.size() == 5);
}

TEST_CASE("xtel top's options are read with their values", "[top]") {
    std::vector<std::string> args = {"top",      "--dir",      ".",    "--sort=p99", "--filter",
                                     "prefill*", "--interval", "0.25", "--once",     "--reverse"};
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    const auto o = parse_options(static_cast<int>(argv.size()), argv.data());
    CHECK(o.dir == ".");
    CHECK(o.sort == column::p99);
    CHECK(o.filter == "prefill*");
    CHECK(o.interval == std::chrono::milliseconds(250));
    CHECK(o.once);
    CHECK(o.reverse);
}

TEST_CASE("xtel top refuses a bad option naming it and what it accepts", "[top]") {
    const auto [arg, value, words] = GENERATE(
        std::tuple<std::string, std::string, std::string>{"--interval", "0.05", "0.1 to 3600"},
        std::tuple<std::string, std::string, std::string>{"--interval", "1.2345", "0.1 to 3600"},
        std::tuple<std::string, std::string, std::string>{"--interval", "1s", "--interval='1s'"},
        std::tuple<std::string, std::string, std::string>{"--sort", "speed",
                                                          "agent, pid, rank, state, tx"},
        std::tuple<std::string, std::string, std::string>{"--dir", "/no/such/dir",
                                                          "does not exist"},
        std::tuple<std::string, std::string, std::string>{"--bogus", "1", "'--bogus'"});
    std::vector<std::string> args = {"top", arg, value};
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    CHECK_THROWS_WITH(parse_options(3, argv.data()), Catch::Contains(words));
}

}  // namespace top_view_test
