// Each transfer reaches an exporter once: as a record when it declares export_transfers, else
// as the events the flusher derives from it. Exporters of both kinds in one pipeline each get
// theirs, and the Prometheus exporter's time histograms count exactly the timed transfers.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/exporters/prometheus.hpp"

namespace metrics_routing_test {

namespace {

constexpr std::string_view derived_names[] = {"agent_tx_bytes",        "agent_rx_bytes",
                                              "agent_tx_requests_num", "agent_rx_requests_num",
                                              "agent_xfer_time",       "agent_xfer_post_time"};

/// What one exporter was handed.
struct seen {
    std::uint64_t derived = 0;  ///< events of the names derived from transfers
    std::uint64_t plain = 0;    ///< every other event
    std::uint64_t transfers = 0;
    std::uint64_t tx_bytes = 0;  ///< summed from agent_tx_bytes events or from records

    void count(std::span<const xtel::event> batch) {
        for (const auto& e : batch) {
            bool d = false;
            for (const auto n : derived_names) {
                d = d || e.name_view() == n;
            }
            (d ? derived : plain) += 1;
            if (e.name_view() == "agent_tx_bytes") {
                tx_bytes += e.value;
            }
        }
    }
};

/// Takes events only.
class event_only {
  public:
    static inline seen s;
    explicit event_only(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event> b) { s.count(b); }
};

/// Takes transfer records as well.
class with_transfers {
  public:
    static inline seen s;
    explicit with_transfers(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event> b) { s.count(b); }
    void export_transfers(std::span<const xtel::transfer_record> t, const xtel::label_table&) {
        for (const auto& r : t) {
            ++s.transfers;
            if (r.dir == xtel::direction::tx && r.attrs.status == xtel::transfer_status::success) {
                s.tx_bytes += r.bytes;
            }
        }
    }
};

xtel::config enabled() {
    xtel::config c;
    c.enabled = true;
    return c;
}

const xtel::telemetry_options manual{
    .staging_capacity = 1024, .batch_size = 256, .start_flusher = false};

/// 3 timed transmits of 100 bytes, 1 untimed one, 1 failed one, and two plain events.
template <class T>
void workload(T& t) {
    for (int i = 0; i < 3; ++i) {
        t.record_transfer(xtel::direction::tx, 1, 100, 1, 2, 3);
    }
    t.record_transfer_counts(xtel::direction::tx, 1, 100, 1);
    xtel::transfer_attributes failed;
    failed.status = xtel::transfer_status::error;
    t.record_transfer(xtel::direction::tx, 1, 100, 1, 2, 3, failed);
    t.add(xtel::category::backend, "ucx_retries", 1);
    t.set(xtel::category::memory, xtel::names::agent_memory_registered, 4096);
    t.flush();
}

template <class... E>
void reset() {
    ((E::s = seen{}), ...);
}

}  // namespace

TEST_CASE("in a mixed pipeline the transfer exporter gets records and plain events only") {
    reset<event_only, with_transfers>();
    xtel::telemetry<event_only, with_transfers> t(enabled(), "mixed", manual);
    workload(t);
    CHECK(with_transfers::s.transfers == 5);
    CHECK(with_transfers::s.derived == 0);
    CHECK(with_transfers::s.plain == 2);
    CHECK(with_transfers::s.tx_bytes == 400);
    // 3 timed: 4 events each; 1 untimed: bytes and requests; the failed one: none.
    CHECK(event_only::s.derived == 14);
    CHECK(event_only::s.plain == 2);
    CHECK(event_only::s.tx_bytes == 400);
    CHECK(t.stats().events_exported == 16);
}

TEST_CASE("when every exporter takes records, transfers are not expanded but still counted") {
    STATIC_REQUIRE_FALSE(xtel::back_end<with_transfers>::expands_transfers);
    reset<with_transfers>();
    xtel::telemetry<with_transfers> t(enabled(), "records", manual);
    workload(t);
    CHECK(with_transfers::s.transfers == 5);
    CHECK(with_transfers::s.derived == 0);
    CHECK(with_transfers::s.plain == 2);
    // The same count as a pipeline that expands them: the statistic does not depend on routing.
    CHECK(t.stats().events_exported == 16);
}

TEST_CASE("when no exporter takes records, none are built and every event is handed over") {
    STATIC_REQUIRE_FALSE(xtel::telemetry<event_only>::takes_transfers);
    reset<event_only>();
    xtel::telemetry<event_only> t(enabled(), "events", manual);
    workload(t);
    CHECK(event_only::s.derived == 14);
    CHECK(event_only::s.plain == 2);
    CHECK(t.stats().events_exported == 16);
}

TEST_CASE("agent_xfer_time counts the timed transfers once, beside an event exporter") {
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    reset<event_only>();
    xtel::telemetry<event_only, xtel::prometheus_exporter> t(enabled(), "timed", manual);
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 40; ++i) {
            t.record_transfer(xtel::direction::tx, 1, 10, 1, 5, 50);
            t.record_transfer_counts(xtel::direction::tx, 1, 10, 1);
        }
        t.flush();
    }
    const auto text = t.get<xtel::prometheus_exporter>().scrape();
    const auto line = [&](std::string_view family) {
        const auto at = text.find("\n" + std::string(family) + "{");
        REQUIRE(at != std::string::npos);
        return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    };
    CHECK(line("agent_xfer_time_us_count")
              .starts_with(R"(agent_xfer_time_us_count{agent_name="timed",)"));
    CHECK(line("agent_xfer_time_us_count").ends_with("} 120"));
    CHECK(line("agent_xfer_time_us_sum").ends_with("} 6000"));
    CHECK(line("agent_xfer_post_time_us_count").ends_with("} 120"));
    CHECK(line("agent_tx_bytes_total").ends_with("} 2400"));
    CHECK(line("agent_tx_requests_num_total").ends_with("} 240"));
    // The event exporter beside it got the same transfers as events.
    CHECK(event_only::s.tx_bytes == 2400);
    CHECK(event_only::s.derived == 120 * 4 + 120 * 2);
}

}  // namespace metrics_routing_test
