// NIXL's prometheus_mp store read (xtel/nixl/multiproc_store.hpp) and the directory of stores
// served as agents (xtel/nixl/multiproc_stores.hpp), on stores made here in the layout NIXL
// 1.5.1 writes (tests/nixl/store_test.py reads the real NIXL's).

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.hpp"
#include "xtel/nixl/multiproc_store.hpp"
#include "xtel/nixl/multiproc_stores.hpp"

namespace nixl_multiproc_store_test {

namespace ms = xtel::nixl::multiproc_store;
using xtel::node::file_kind;
using xtel::node::refusal;

namespace {

template <class T>
void put(std::vector<std::uint8_t>& b, std::size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
}

void put_text(std::vector<std::uint8_t>& b, std::size_t at, std::string_view s) {
    std::memcpy(b.data() + at, s.data(), s.size());
}

/// NIXL's 18 default bounds, in microseconds.
constexpr double bounds[] = {10,     25,     50,     100,     250,     500,
                             1000,   2500,   5000,   10000,   25000,   50000,
                             100000, 250000, 500000, 1000000, 5000000, 10000000};

/// A store as NIXL 1.5.1 writes it for agent `name` of process `pid` after 5 WRITEs and 3 READs
/// of 64 KiB, one NOT_FOUND error and 64 KiB registered (the real one of tests/nixl's run).
std::vector<std::uint8_t> store(std::string_view name, std::int64_t pid) {
    std::vector<std::uint8_t> b(ms::file_size);
    put_text(b, 0, "NIXLMPS1");
    put<std::uint32_t>(b, 8, 1);
    put<std::uint32_t>(b, 12, 21);
    put<std::int64_t>(b, 16, pid);
    put<std::uint64_t>(b, 24, 36091460140814);
    put<std::uint64_t>(b, 32, 0);
    put<std::uint64_t>(b, 40, std::size(bounds));
    put_text(b, 48, name);
    put_text(b, 304, "host-a");
    for (std::size_t i = 0; i < std::size(bounds); ++i) {
        put<double>(b, 496 + 8 * i, bounds[i]);
    }
    const std::uint64_t counters[] = {327680, 196608, 5, 3, 65536, 0, 62628, 1627, 0, 0, 0, 1};
    for (std::size_t t = 0; t < std::size(counters); ++t) {
        put<std::uint64_t>(b, 752 + 8 * t, counters[t]);
    }
    put<std::uint64_t>(b, 920 + 8 * 0, 65536);  // the last WRITE's bytes
    put<std::uint64_t>(b, 920 + 8 * 6, 5);      // the last transfer's time
    // XFER_TIME's buckets: 3 at <= 10 us, 1 at <= 50, 1 at <= 100, 1 at <= 1000, 2 past 10 s.
    const std::pair<std::size_t, std::uint64_t> xfer[] = {{0, 3}, {2, 1}, {3, 1}, {6, 1}, {18, 2}};
    for (const auto& [bucket, n] : xfer) {
        put<std::uint64_t>(b, 1088 + 8 * (33 * 6 + bucket), n);
    }
    put<std::uint64_t>(b, 6632 + 8 * 6, 62628);
    return b;
}

void write(const std::filesystem::path& p, const std::vector<std::uint8_t>& b) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// The file open and flock'ed exclusively, as NIXL's writer holds its store, for its scope.
struct locked {
    int fd;
    explicit locked(const std::filesystem::path& p) : fd(::open(p.c_str(), O_RDWR | O_CLOEXEC)) {
        REQUIRE(fd >= 0);
        REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    }
    ~locked() { ::close(fd); }
};

const xtel::metrics::family_snapshot* family(const xtel::metrics::snapshot& s,
                                             std::string_view name) {
    for (const auto& f : s.families) {
        if (f.spec.name == name) {
            return &f;
        }
    }
    return nullptr;
}

/// The value of the series of `name` whose label `label` is `value` (or the first).
std::optional<std::uint64_t> value_of(const xtel::metrics::snapshot& s,
                                      std::string_view name,
                                      std::string_view label = {},
                                      std::string_view value = {}) {
    const auto* f = family(s, name);
    if (f == nullptr) {
        return std::nullopt;
    }
    for (const auto& series : f->series) {
        if (label.empty()) {
            return series.value;
        }
        for (std::size_t i = 0; i < f->spec.label_names.size(); ++i) {
            if (f->spec.label_names[i] == label && series.label_values[i] == value) {
                return series.value;
            }
        }
    }
    return std::nullopt;
}

ms::verdict verdict_of(const std::vector<std::uint8_t>& b) {
    return ms::check(b).what;
}

}  // namespace

TEST_CASE("A NIXL 1.5.1 prometheus_mp store is read field by field at NIXL's offsets") {
    const auto c = ms::check(store("nixl-initiator", 12616));
    REQUIRE(c.what == ms::verdict::ok);
    const ms::store& s = c.fields;
    CHECK(s.pid == 12616);
    CHECK(s.agent_name == "nixl-initiator");
    CHECK(s.hostname == "host-a");
    CHECK(s.local_rank.empty());
    CHECK(s.bounds.size() == 18);
    CHECK(s.bounds.back() == 10000000);
    CHECK(s.counters[0] == 327680);
    CHECK(s.counters[11] == 1);  // NOT_FOUND
    CHECK(s.gauges[6] == 5);
    REQUIRE(s.buckets[6].size() == 19);  // the 18 bounds' and +Inf
    CHECK(s.buckets[6][0] == 3);
    CHECK(s.buckets[6][18] == 2);
    CHECK(s.sums[6] == 62628);
}

TEST_CASE(
    "A store of another magic, schema, slot or bucket count is not NIXL's, and says what is read") {
    auto magic = store("a", 1);
    put_text(magic, 0, "NIXLMPS2");
    CHECK(verdict_of(magic) == ms::verdict::not_nixl);
    auto schema = store("a", 1);
    put<std::uint32_t>(schema, 8, 2);
    const auto c = ms::check(schema);
    CHECK(c.what == ms::verdict::not_nixl);
    CHECK(c.why == "schema 2 with 21 slots; xtel reads NIXL's store schema 1 with 21 slots");
    auto slots = store("a", 1);
    put<std::uint32_t>(slots, 12, 22);
    CHECK(verdict_of(slots) == ms::verdict::not_nixl);
    for (const std::uint64_t buckets : {0, 33}) {
        auto b = store("a", 1);
        put<std::uint64_t>(b, 40, buckets);
        CHECK(verdict_of(b) == ms::verdict::not_nixl);
    }
    CHECK(verdict_of(std::vector<std::uint8_t>(ms::file_size)) == ms::verdict::not_ready);
}

TEST_CASE("A store truncated, grown, or with a field no NIXL writes is damaged") {
    auto truncated = store("a", 1);
    truncated.resize(ms::file_size - 8);
    CHECK(ms::check(truncated).why == "6792 bytes, where NIXL's store schema 1 takes 6800");
    auto grown = store("a", 1);
    grown.resize(ms::file_size + 1);
    CHECK(verdict_of(grown) == ms::verdict::damaged);
    CHECK(verdict_of(std::vector<std::uint8_t>(20, 'N')) == ms::verdict::damaged);
    CHECK(verdict_of(store("a", 0)) == ms::verdict::damaged);     // no pid
    CHECK(verdict_of(store("", 1)) == ms::verdict::damaged);      // no agent name
    CHECK(verdict_of(store("a\nb", 1)) == ms::verdict::damaged);  // a control character
    CHECK(verdict_of(store(std::string(256, 'a'), 1)) == ms::verdict::damaged);  // no NUL
    auto unsorted = store("a", 1);
    put<double>(unsorted, 496 + 8, 5.0);  // 10, 5, 50...
    CHECK(verdict_of(unsorted) == ms::verdict::damaged);
    auto overflow = store("a", 1);
    put<std::uint64_t>(overflow, 1088 + 8 * (33 * 6 + 1), ~std::uint64_t{0});  // past its 3
    CHECK(verdict_of(overflow) == ms::verdict::damaged);
}

/// A directory reader of NIXL stores serving `sets` (both: NIXL_TELEMETRY_METRIC_SET=both),
/// with `globs` chosen.
xtel::nixl::multiproc_stores reader(
    const xtel_test::temp_dir& dir,
    std::vector<std::string> globs = {},
    xtel::metrics::family_sets sets = xtel::metrics::family_sets::both) {
    xtel::metrics::agent_metrics_settings model;
    model.sets = sets;
    model.hostname = "the-reader";  // not the agent's: NIXL's store says
    return xtel::nixl::multiproc_stores({.dir = dir.path(),
                                         .program = "test",
                                         .allowed_uids = {},
                                         .model = model,
                                         .families = std::move(globs)});
}

TEST_CASE(
    "A live writer's store is served as its agent under NIXL's names with the values NIXL's "
    "prometheus_mp serves") {
    const xtel_test::temp_dir dir;
    const auto path = dir.path() / "nixl.1.2.0.mmap";
    write(path, store("nixl-initiator", ::getpid()));
    const locked writer(path);
    auto stores = reader(dir);
    const auto served = stores.refresh();
    REQUIRE(served.size() == 1);
    const auto& s = *served[0];
    REQUIRE(s.labels.size() == 3);
    CHECK(s.labels[0].value == "nixl-initiator");
    CHECK(s.labels[1].name == "pid");
    CHECK(s.labels[1].value == std::to_string(::getpid()));
    CHECK(s.labels[2].name == "agent_instance");
    CHECK(s.labels[2].value == "0");
    CHECK(value_of(s, "agent_tx_bytes_total", "hostname", "host-a") == 327680);
    CHECK(value_of(s, "agent_rx_bytes_total") == 196608);
    CHECK(value_of(s, "agent_tx_requests_num_total") == 5);
    CHECK(value_of(s, "agent_rx_requests_num_total") == 3);
    CHECK(value_of(s, "agent_memory_registered_total") == 65536);
    CHECK(value_of(s, "agent_xfer_time_total") == 62628);
    CHECK(value_of(s, "agent_xfer_post_time_total") == 1627);
    CHECK(value_of(s, "agent_tx_last_bytes") == 65536);
    CHECK(value_of(s, "agent_xfer_time") == 5);
    CHECK(value_of(s, "agent_errors_total", "status", "not_found") == 1);
    CHECK(value_of(s, "agent_errors_total", "status", "backend") == 0);
    const auto* h = family(s, "agent_xfer_time_us");
    REQUIRE(h != nullptr);
    CHECK(h->spec.bounds.size() == 18);
    REQUIRE(h->series.size() == 1);
    CHECK(h->series[0].count == 8);  // the 2 past every bound count in +Inf alone
    CHECK(h->series[0].sum == 62628);
    REQUIRE(h->series[0].buckets.size() == 18);
    CHECK(h->series[0].buckets[2] == 1);
    // xtel's set as far as a store tells: its totals, by direction and kind.
    CHECK(value_of(s, "xtel_transfer_bytes_total", "direction", "tx") == 327680);
    CHECK(value_of(s, "xtel_transfer_bytes_total", "direction", "rx") == 196608);
    CHECK(value_of(s, "xtel_transfer_requests_total", "direction", "tx") == 5);
    CHECK(value_of(s, "xtel_transfer_requests_total", "operation", "read") == 3);
    CHECK(value_of(s, "xtel_errors_total", "kind", "not_found") == 1);
    CHECK(value_of(s, "xtel_memory_registered_bytes") == 65536);
    CHECK(value_of(s, "xtel_telemetry_events_dropped_total") == 0);
    // Not what a store tells: the time of a write apart from a read's, or registrations.
    CHECK(family(s, "xtel_transfer_duration_seconds") == nullptr);
    CHECK(family(s, "xtel_memory_registrations_total") == nullptr);
    for (const auto& f : s.families) {
        for (const auto& n : f.spec.label_names) {
            CHECK(n != "pid");  // the reader's pid is not the agent's: the snapshot's label is
        }
    }
    // Read again unchanged, it is the same snapshot: a shared body stays shared.
    CHECK(stores.refresh().front() == served.front());
}

TEST_CASE(
    "A store's xtel set grows by its counters' increments, and a counter that falls is "
    "refused as damaged") {
    const xtel_test::temp_dir dir;
    const auto path = dir.path() / "nixl.1.2.0.mmap";
    write(path, store("a", ::getpid()));
    const locked writer(path);
    auto stores = reader(dir, {}, xtel::metrics::family_sets::xtel);
    REQUIRE(stores.refresh().size() == 1);
    // NIXL's writer adds two WRITEs of 4 KiB in place.
    const auto put_counter = [&](std::size_t type, std::uint64_t v) {
        REQUIRE(::pwrite(writer.fd, &v, sizeof v, static_cast<off_t>(752 + 8 * type)) == 8);
    };
    put_counter(0, 327680 + 8192);
    put_counter(2, 7);
    auto served = stores.refresh();
    REQUIRE(served.size() == 1);
    CHECK(value_of(*served[0], "xtel_transfer_bytes_total", "direction", "tx") == 335872);
    CHECK(value_of(*served[0], "xtel_transfer_requests_total", "direction", "tx") == 7);
    CHECK(family(*served[0], "agent_tx_bytes_total") == nullptr);  // xtel's set alone
    put_counter(2, 6);
    CHECK(stores.refresh().empty());
    CHECK(stores.files().refused(file_kind::nixl_store, refusal::damaged) == 1);
}

TEST_CASE("A store whose writer ended is not served, and not counted as refused") {
    const xtel_test::temp_dir dir;
    write(dir.path() / "nixl.1.2.0.mmap", store("gone", ::getpid()));
    auto stores = reader(dir);
    CHECK(stores.refresh().empty());
    for (const refusal r : xtel::node::nixl_store_reasons) {
        CHECK(stores.files().refused(file_kind::nixl_store, r) == 0);
    }
}

TEST_CASE(
    "A store whose lock another pid holds, or that is not NIXL's, is refused once, and nothing "
    "of it is served") {
    const xtel_test::temp_dir dir;
    const auto other = dir.path() / "nixl.1.2.0.mmap";
    write(other, store("impostor", ::getpid() + 1));  // this process holds the lock
    const locked writer(other);
    auto bad = store("bad", ::getpid());
    put<std::uint32_t>(bad, 8, 7);
    write(dir.path() / "nixl.1.2.1.mmap", bad);
    const locked bad_writer(dir.path() / "nixl.1.2.1.mmap");
    write(dir.path() / "nixl-owner.127.0.0.1:1.lock", {});  // NIXL's own: not a store
    auto stores = reader(dir);
    for (int i = 0; i < 3; ++i) {
        CHECK(stores.refresh().empty());
    }
    CHECK(stores.files().refused(file_kind::nixl_store, refusal::writer_mismatch) == 1);
    CHECK(stores.files().refused(file_kind::nixl_store, refusal::not_nixl_file) == 1);
    CHECK(stores.files().refused(file_kind::nixl_store, refusal::damaged) == 0);
}

TEST_CASE("A directory of NIXL stores serves only the families --metrics chooses") {
    const xtel_test::temp_dir dir;
    const auto path = dir.path() / "nixl.1.2.0.mmap";
    write(path, store("a", ::getpid()));
    const locked writer(path);
    auto stores = reader(dir, {"agent_tx_*"});  // NIXL's set and xtel's: only these
    const auto served = stores.refresh();
    REQUIRE(served.size() == 1);
    REQUIRE(served[0]->families.size() == 3);
    CHECK(served[0]->families[0].spec.name == "agent_tx_bytes_total");
    CHECK(served[0]->families[1].spec.name == "agent_tx_last_bytes");
    CHECK(served[0]->families[2].spec.name == "agent_tx_requests_num_total");
}

}  // namespace nixl_multiproc_store_test
