// The target's side of a notified transfer: the record the agent stages for each transfer another
// agent notified it of (telemetry::record_notified) reaches exporters of transfer records marked
// notified, makes no transfer event, is counted in xtel_notified_{transfers,bytes}_total and in
// none of the agent's own transfer families or builders, and becomes the target's span in the
// initiator's trace.

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "span_recorder.hpp"
#include "test_util.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/exporters/prometheus.hpp"
#include "xtel/metrics/builder.hpp"

namespace notified_transfer_test {

namespace tr = xtel::trace;
namespace sr = xtel::trace::span_ring;

namespace {

const xtel::telemetry_options manual{.start_flusher = false};
constexpr std::uint64_t now = 1'700'000'000'000'000;  // µs since the epoch
const std::string caller_tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

xtel::config enabled() {
    xtel::config cfg;
    cfg.enabled = true;
    return cfg;
}

/// Keeps the transfer records it is handed, and counts the events.
struct keeping {
    explicit keeping(const xtel::exporter_context&) {}
    void export_transfers(std::span<const xtel::transfer_record> t, const xtel::label_table& l) {
        for (const auto& r : t) {
            records.push_back(r);
            ids.emplace_back(r.request_id);
            peers.emplace_back(l.name(r.attrs.remote_agent));
        }
    }
    void export_batch(std::span<const xtel::event>) {}
    std::vector<xtel::transfer_record> records;
    std::vector<std::string> ids;
    std::vector<std::string> peers;
};

/// Takes events only.
struct counting_events {
    explicit counting_events(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event> b) {
        for (const auto& e : b) {
            names.emplace_back(e.name.view());
        }
    }
    std::vector<std::string> names;
};

/// Counts every transfer the model's processor shows it.
class transfers_seen : public xtel::metrics::builder {
  public:
    explicit transfers_seen(std::atomic<std::uint64_t>& seen) : seen_(seen) {}
    void setup(xtel::metrics::metric_store&, const xtel::metrics::attribute_registry&) override {}
    void build(const xtel::metrics::transfer_group& g, xtel::metrics::metric_store&) override {
        seen_ += g.totals.transfers;
    }

  private:
    std::atomic<std::uint64_t>& seen_;
};

xtel::transfer_attributes from(xtel::label_table& labels, std::string_view initiator) {
    xtel::transfer_attributes a;
    a.remote_agent = labels.intern(initiator);
    a.op = xtel::transfer_op::write;
    return a;
}

/// The value on the first line of `text` that starts with `prefix` ("" when none).
std::string value_of(const std::string& text, const std::string& prefix) {
    const std::size_t at = text.find("\n" + prefix);
    if (at == std::string::npos) {
        return "";
    }
    const std::size_t end = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, end - at - 1);
    return line.substr(line.rfind(' ') + 1);
}

bool has_line(const std::string& text, const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("a notified transfer reaches transfer exporters as a notified record and makes no event",
          "[notified]") {
    xtel::telemetry<keeping, counting_events> t(enabled(), "target", manual);
    t.record_notified(now, 4096, from(t.labels(), "prefill-0"), caller_tp);
    t.record_notified(now + 1, 512, from(t.labels(), "prefill-0"));
    t.flush();

    const auto& k = t.get<keeping>();
    REQUIRE(k.records.size() == 2);
    for (const auto& r : k.records) {
        CHECK(r.notified);
        CHECK(r.dir == xtel::direction::rx);  // a write came in
        CHECK(r.requests == 1);
        CHECK_FALSE(r.timed);
    }
    CHECK(k.records[0].bytes == 4096);
    CHECK(k.ids[0] == caller_tp);
    CHECK(k.ids[1].empty());
    CHECK(k.peers[0] == "prefill-0");
    for (const auto& name : t.get<counting_events>().names) {
        CHECK(name.find("agent_rx") == std::string::npos);
        CHECK(name.find("agent_tx") == std::string::npos);
    }
}

TEST_CASE(
    "with one slot left a tagged or notified record is staged alone, losing only its id, and "
    "with none it is dropped and counted",
    "[notified]") {
    const bool notified = GENERATE(false, true);
    CAPTURE(notified);
    xtel::telemetry_options small = manual;
    small.staging_capacity = 8;
    xtel::telemetry<keeping> t(enabled(), "target", small);
    const xtel::transfer_attributes a = from(t.labels(), "a");
    // A second id for the records after the first: a record whose id is the one its thread
    // staged last needs no slots for it (tag_cache.hpp), and would keep it with no room left.
    const std::string other_tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const auto tagged = [&](std::uint64_t bytes, const std::string& id) {
        if (notified) {
            t.record_notified(now, bytes, a, id);
        } else {
            t.record_transfer(xtel::direction::tx, now, bytes, 1, 1, 2, a, id);
        }
    };
    // The attributes' first record carries them (two slots); later ones are one slot.
    t.record_transfer(xtel::direction::tx, now, 100, 1, 1, 2, a);
    t.flush();
    tagged(1, caller_tp);  // three slots: the record and its id
    for (int i = 0; i < 4; ++i) {
        t.record_transfer(xtel::direction::tx, now, 2, 1, 1, 2, a);  // one slot each
    }
    tagged(3, other_tp);  // one slot left: the record alone
    tagged(4, other_tp);  // none left
    CHECK(t.stats().records_dropped == 1);
    t.flush();
    const auto& k = t.get<keeping>();
    REQUIRE(k.records.size() == 7);
    CHECK(k.records[0].bytes == 100);
    CHECK(k.records[1].bytes == 1);
    CHECK(k.ids[1] == caller_tp);
    CHECK(k.records[1].notified == notified);
    CHECK(k.records[2].bytes == 2);
    CHECK(k.records[5].bytes == 2);
    CHECK(k.records[6].bytes == 3);
    CHECK(k.ids[6].empty());
    CHECK(k.records[6].notified == notified);
    CHECK(k.records[6].attrs == a);
    // The ring is empty again: a tagged record has room for its id.
    tagged(5, other_tp);
    t.flush();
    REQUIRE(k.records.size() == 8);
    CHECK(k.ids[7] == other_tp);
}

TEST_CASE("a slot a notified record used is an ordinary transfer when reused", "[notified]") {
    xtel::telemetry_options small = manual;
    small.staging_capacity = 4;  // the first record carries its attributes: two slots
    xtel::telemetry<keeping> t(enabled(), "target", small);
    t.record_notified(now, 1, from(t.labels(), "a"));
    t.record_notified(now, 1, from(t.labels(), "a"));
    t.flush();
    t.record_transfer(xtel::direction::tx, now, 8, 1, 1, 2);
    t.record_transfer(xtel::direction::tx, now, 8, 1, 1, 2);
    t.flush();
    const auto& k = t.get<keeping>();
    REQUIRE(k.records.size() == 4);
    CHECK_FALSE(k.records[2].notified);
    CHECK_FALSE(k.records[3].notified);
}

TEST_CASE("notified transfers are counted in the notified families only, and no builder sees them",
          "[notified]") {
    const xtel_test::scoped_env address(xtel::env::prometheus_address, "127.0.0.1:0");
    const xtel_test::scoped_env sets(xtel::env::metric_set, "both");
    const auto cfg = xtel_test::enabled_config({"prometheus"}, "");
    xtel::telemetry<xtel::prometheus_exporter> t(cfg, "decode-1", manual);
    std::atomic<std::uint64_t> seen{0};
    t.metric_state().add_builder(std::make_unique<transfers_seen>(seen));
    for (int i = 0; i < 3; ++i) {
        t.record_transfer(xtel::direction::tx, now, 10, 1, 5, 50);
    }
    for (int i = 0; i < 2; ++i) {
        t.record_notified(now, 4096, from(t.labels(), "prefill-0"), caller_tp);
    }
    t.flush();

    CHECK(seen == 3);
    const auto text = t.get<xtel::prometheus_exporter>().scrape();
    INFO(text);
    CHECK(has_line(text,
                   "xtel_notified_transfers_total{agent_name=\"decode-1\",operation=\"write\","
                   "remote_agent=\"prefill-0\"} 2"));
    CHECK(has_line(text,
                   "xtel_notified_bytes_total{agent_name=\"decode-1\",operation=\"write\","
                   "remote_agent=\"prefill-0\"} 8192"));
    // The agent's own transfers, and only them: 3 x 10 bytes sent, nothing received.
    CHECK(value_of(text, "agent_tx_bytes_total{") == "30");
    CHECK(value_of(text, "agent_rx_bytes_total{") == "0");
    CHECK(value_of(text, "agent_rx_requests_num_total{") == "0");
    // No family of the agent's own transfers names the initiator.
    std::size_t lines_naming_it = 0;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line = std::string_view(text).substr(at, end - at);
        if (line.find("remote_agent=\"prefill-0\"") != std::string_view::npos) {
            ++lines_naming_it;
            CHECK(line.starts_with("xtel_notified_"));
        }
        at = end + 1;
    }
    CHECK(lines_naming_it == 2);
}

TEST_CASE(
    "a notified transfer in a sampled trace becomes the target's span under the caller's span",
    "[notified][trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    tr::sampler_settings s;
    s.slow_us = 0;
    s.sample = 1.0;
    s.budget = 1000;
    xtel_test::span_recorder rec(dir.path(), "decode-1", {}, s, now, 16);
    xtel::transfer_record r;
    r.timestamp_us = now;
    r.bytes = 4096;
    r.requests = 1;
    r.timed = false;
    r.notified = true;
    r.dir = xtel::direction::rx;
    r.attrs.remote_agent = labels.intern("prefill-0");
    r.request_id = caller_tp;
    xtel::transfer_record untraced = r;
    untraced.request_id = {};
    const std::vector<xtel::transfer_record> round = {r, untraced};
    rec.record(round, labels, now);

    sr::reader reader(dir.path() / "decode-1.spans");
    std::vector<sr::span_record> spans;
    reader.read(spans);
    REQUIRE(spans.size() == 1);  // the untraced one has no trace to join
    CHECK(tr::to_hex(spans[0].trace) == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(tr::to_hex(spans[0].parent) == "00f067aa0ba902b7");
    CHECK(spans[0].kind == static_cast<std::uint8_t>(sr::side::target));
    CHECK(spans[0].reason == static_cast<std::uint8_t>(tr::span_reason::sampled));
    CHECK(spans[0].start_us == now);
    CHECK(spans[0].end_us == now);
    CHECK(sr::text(spans[0].remote_agent) == "prefill-0");
}

TEST_CASE("a notified transfer is never a slow span: unsampled, it writes none",
          "[notified][trace_recorder]") {
    const xtel_test::temp_dir dir;
    xtel::label_table labels;
    tr::sampler_settings s;
    s.slow_us = 0;  // every timed transfer would be slow
    s.sample = 0.0;
    s.budget = 1000;
    xtel_test::span_recorder rec(dir.path(), "decode-1", {}, s, now, 16);
    xtel::transfer_record r;
    r.timestamp_us = now;
    r.bytes = 4096;
    r.requests = 1;
    r.timed = false;
    r.notified = true;
    r.request_id = caller_tp;
    const std::vector<xtel::transfer_record> round = {r};
    rec.record(round, labels, now);
    CHECK(rec.counts().kept == std::array<std::uint64_t, 4>{});
}

}  // namespace notified_transfer_test
