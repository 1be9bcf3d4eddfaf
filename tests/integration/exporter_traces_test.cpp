// xtel-exporter's OTLP traces, with real parts: span rings written by the real writer
// (xtel::trace::span_ring::writer) into a directory, xtel-exporter started on it with the
// OpenTelemetry variables pointing at a local HTTP receiver, and what arrives decoded with the
// messages of proto/ (the OpenTelemetry JS module the metrics' receiver uses has no trace types
// in the version it pins). Every check is of the exact spans written: their ids, each once.

#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exporter_support.hpp"
#include "otlp_trace.pb.h"
#include "prometheus_support.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/span_ring.hpp"

using prom_it::child_process;
using xtel_test::temp_dir;
using namespace std::chrono_literals;
namespace ring = xtel::trace::span_ring;
namespace pb = xtel::otlp;

namespace {

template <class Done>
bool eventually(Done&& done, std::chrono::seconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(100ms);
    }
    return true;
}

/// A receiver of POST /v1/traces on 127.0.0.1:`port` (0: any) that answers 200 and keeps each
/// span's id (hex) as decoded, with the request's encoding.
class trace_receiver {
  public:
    explicit trace_receiver(int port = 0) {
        server_.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
            const std::lock_guard lock(mutex_);
            const bool json = req.get_header_value("Content-Type") == "application/json";
            if (json) {
                json_bodies_.push_back(req.body);
            } else {
                pb::ExportTraceServiceRequest r;
                if (!r.ParseFromString(req.body)) {
                    res.status = 400;
                    return;
                }
                for (const auto& rs : r.resource_spans()) {
                    for (const auto& ss : rs.scope_spans()) {
                        for (const auto& s : ss.spans()) {
                            span_ids_.push_back(hex(s.span_id()));
                            agents_.push_back(agent_of(rs.resource()));
                            spans_.push_back(s);
                        }
                    }
                }
            }
            res.status = 200;
        });
        port_ = port == 0 ? server_.bind_to_any_port("127.0.0.1")
                          : (server_.bind_to_port("127.0.0.1", port) ? port : -1);
        REQUIRE(port_ > 0);
        thread_ = std::thread([this] { server_.listen_after_bind(); });
        while (!server_.is_running()) {
            std::this_thread::sleep_for(1ms);
        }
    }
    ~trace_receiver() {
        server_.stop();
        thread_.join();
    }
    trace_receiver(const trace_receiver&) = delete;
    trace_receiver& operator=(const trace_receiver&) = delete;

    std::string url() const { return fmt::format("http://127.0.0.1:{}/v1/traces", port_); }
    /// The span ids of the protobuf requests, in arrival order.
    std::vector<std::string> span_ids() const {
        const std::lock_guard lock(mutex_);
        return span_ids_;
    }
    std::vector<std::string> agents() const {
        const std::lock_guard lock(mutex_);
        return agents_;
    }
    /// The spans of the protobuf requests, as decoded.
    std::vector<pb::Span> spans() const {
        const std::lock_guard lock(mutex_);
        return spans_;
    }
    std::string json() const {
        const std::lock_guard lock(mutex_);
        std::string out;
        for (const auto& b : json_bodies_) {
            out += b;
            out += '\n';
        }
        return out;
    }

  private:
  public:
    static std::string hex(const std::string& bytes) {
        std::string out;
        for (const char c : bytes) {
            out += fmt::format("{:02x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        }
        return out;
    }

  private:
    static std::string agent_of(const pb::Resource& r) {
        for (const auto& kv : r.attributes()) {
            if (kv.key() == "xtel.agent.name") {
                return kv.value().string_value();
            }
        }
        return {};
    }

    httplib::Server server_;
    std::thread thread_;
    int port_ = 0;
    mutable std::mutex mutex_;
    std::vector<std::string> span_ids_;
    std::vector<std::string> agents_;
    std::vector<pb::Span> spans_;
    std::vector<std::string> json_bodies_;
};

/// `count` spans of `agent` numbered from `first`: span ids distinct, never zero.
std::vector<ring::span_record> spans(std::string_view agent,
                                     std::uint32_t first,
                                     std::uint32_t count) {
    std::vector<ring::span_record> out;
    xtel::trace::id_generator ids(first * 7919u + 1);
    for (std::uint32_t i = 0; i < count; ++i) {
        ring::span_record r;
        r.trace = ids.next_trace_id();
        r.span = ids.next_span_id();
        r.start_us = 1'700'000'000'000'000 + first + i;
        r.end_us = r.start_us + 100;
        r.bytes = 4096;
        r.descriptors = 1;
        r.operation = 1;
        r.kind = static_cast<std::uint8_t>(ring::side::initiator);
        r.reason = 2;
        ring::set_text(r.agent, agent);
        ring::set_text(r.remote_agent, "decode-0");
        out.push_back(r);
    }
    return out;
}

std::vector<std::string> ids_of(const std::vector<ring::span_record>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) {
        out.push_back(xtel::trace::to_hex(r.span));
    }
    return out;
}

/// xtel-exporter over `dir` sending traces to `url` with `protocol`, OTLP metrics off.
child_process start_traces_exporter(const std::filesystem::path& dir,
                                    const std::string& url,
                                    const std::string& protocol = "http/protobuf") {
    prom_it::spawn_options o;
    o.argv = {XTEL_EXPORTER, "--listen", "127.0.0.1:0", "--dir", dir.string()};
    o.env = {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url},
             {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol}};
    o.unset = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
               "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL"};
    return child_process(o);
}

/// The value of the series `line` (the name and labels) in the exporter's /metrics; 0 when absent.
std::uint64_t health(int port, const std::string& line) {
    const auto v = prom_it::value_of(prom_it::scrape(port), line + " ");
    return v ? std::stoull(*v) : 0;
}

}  // namespace

TEST_CASE("xtel-exporter exports exactly the spans a ring holds, each once, as OTLP protobuf",
          "[exporter_traces]") {
    temp_dir tmp;
    trace_receiver receiver;
    auto writer = std::make_unique<ring::writer>(tmp.path(), "prefill-0", 64);
    // Written before the exporter looks: read from the oldest the ring holds.
    const auto before = spans("prefill-0", 1, 40);
    REQUIRE(writer->write(before));
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= before.size(); }));
    // Then more, while it reads.
    const auto after = spans("prefill-0", 1000, 30);
    REQUIRE(writer->write(after));
    auto expected = ids_of(before);
    for (const auto& id : ids_of(after)) {
        expected.push_back(id);
    }
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= expected.size(); }));
    // The writer closes: its file is read to its end, then let go.
    writer.reset();
    REQUIRE(eventually([&] { return health(port, "xtel_exporter_span_files") == 0; }));
    std::this_thread::sleep_for(1s);
    CHECK(receiver.span_ids() == expected);
    CHECK(receiver.agents() == std::vector<std::string>(expected.size(), "prefill-0"));
    CHECK(health(port, "xtel_exporter_spans_read_total") == expected.size());
    CHECK(health(port, "xtel_exporter_spans_queued_total") == expected.size());
    CHECK(health(port, "xtel_exporter_spans_lost_total") == 0);
    CHECK(health(port, "xtel_exporter_otlp_traces_requests_sent_total") >= 1);
}

TEST_CASE("xtel-exporter exports a ring's spans as OTLP JSON with their hex ids",
          "[exporter_traces]") {
    temp_dir tmp;
    trace_receiver receiver;
    ring::writer writer(tmp.path(), "decode-3", 64);
    const auto written = spans("decode-3", 5, 25);
    REQUIRE(writer.write(written));
    auto exporter = start_traces_exporter(tmp.path(), receiver.url(), "http/json");
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually(
        [&] { return health(port, "xtel_exporter_spans_queued_total") == written.size(); }));
    REQUIRE(
        eventually([&] { return health(port, "xtel_exporter_otlp_traces_requests_queued") == 0; }));
    const std::string json = receiver.json();
    CHECK(xtel_test::count_of(json, R"("spanId":")") == written.size());
    for (const auto& id : ids_of(written)) {
        CHECK(xtel_test::count_of(json, fmt::format(R"("spanId":"{}")", id)) == 1);
    }
    CHECK(xtel_test::count_of(
              json, R"({"key":"xtel.agent.name","value":{"stringValue":"decode-3"}})") >= 1);
}

TEST_CASE("spans pushed while the traces receiver is down arrive once it is up, none lost",
          "[exporter_traces]") {
    temp_dir tmp;
    const int receiver_port = prom_it::free_port();
    ring::writer writer(tmp.path(), "prefill-1", 256);
    auto exporter = start_traces_exporter(
        tmp.path(), fmt::format("http://127.0.0.1:{}/v1/traces", receiver_port));
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    std::vector<std::string> expected;
    // Three batches, each its own poll and request, while nobody listens.
    for (std::uint32_t batch = 0; batch < 3; ++batch) {
        const auto s = spans("prefill-1", 100 * (batch + 1), 20);
        REQUIRE(writer.write(s));
        for (const auto& id : ids_of(s)) {
            expected.push_back(id);
        }
        REQUIRE(eventually(
            [&] { return health(port, "xtel_exporter_spans_queued_total") == expected.size(); }));
    }
    REQUIRE(eventually(
        [&] { return health(port, "xtel_exporter_otlp_traces_failed_attempts_total") >= 2; }));
    CHECK(health(port, "xtel_exporter_otlp_traces_requests_sent_total") == 0);

    trace_receiver late(receiver_port);
    REQUIRE(eventually([&] { return late.span_ids().size() >= expected.size(); }));
    REQUIRE(
        eventually([&] { return health(port, "xtel_exporter_otlp_traces_requests_queued") == 0; }));
    CHECK(late.span_ids() == expected);
    CHECK(health(port, "xtel_exporter_otlp_traces_requests_dropped_total") == 0);
    CHECK(health(port, "xtel_exporter_otlp_traces_requests_rejected_total") == 0);
}

TEST_CASE("a span file of another owner is refused, counted, and none of its spans exported",
          "[exporter_traces]") {
    if (::geteuid() != 0) {
        WARN("SKIPPED: giving a file to another owner needs the test to run as root");
        return;
    }
    temp_dir tmp;
    trace_receiver receiver;
    ring::writer foreign(tmp.path(), "foreign-0", 16);
    REQUIRE(foreign.write(spans("foreign-0", 1, 5)));
    REQUIRE(::chown(foreign.path().c_str(), 4242, 4242) == 0);
    // A file of its own beside it is read: the refusal is of that file only.
    ring::writer own(tmp.path(), "own-0", 16);
    const auto mine = spans("own-0", 50, 3);
    REQUIRE(own.write(mine));
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= mine.size(); }));
    REQUIRE(eventually([&] {
        return health(port, R"(xtel_exporter_span_files_refused_total{reason="foreign_owner"})") ==
               1;
    }));
    // Polls go on; the refusal is counted once, not once a poll.
    std::this_thread::sleep_for(1500ms);
    CHECK(health(port, R"(xtel_exporter_span_files_refused_total{reason="foreign_owner"})") == 1);
    CHECK(receiver.span_ids() == ids_of(mine));
    CHECK(health(port, "xtel_exporter_span_files") == 1);
}

TEST_CASE("a ring made again under its name is read from its start, the old one's spans kept",
          "[exporter_traces]") {
    temp_dir tmp;
    trace_receiver receiver;
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    std::vector<std::string> expected;
    for (std::uint32_t life = 0; life < 2; ++life) {
        // The agent restarts: the same name, a new file, its spans numbered from 1 again.
        ring::writer writer(tmp.path(), "restarts-0", 32);
        const auto s = spans("restarts-0", 300 * (life + 1), 12);
        REQUIRE(writer.write(s));
        for (const auto& id : ids_of(s)) {
            expected.push_back(id);
        }
        REQUIRE(eventually([&] { return receiver.span_ids().size() >= expected.size(); }));
    }
    REQUIRE(eventually([&] { return health(port, "xtel_exporter_span_files") == 0; }));
    CHECK(receiver.span_ids() == expected);
    CHECK(health(port, "xtel_exporter_spans_read_total") == expected.size());
}

TEST_CASE("spans overwritten before xtel-exporter read them are counted lost, the rest exported",
          "[exporter_traces]") {
    temp_dir tmp;
    trace_receiver receiver;
    ring::writer writer(tmp.path(), "fast-0", 8);
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    const auto first = spans("fast-0", 1, 8);
    REQUIRE(writer.write(first));
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= first.size(); }));
    // 30 at once, between two polls, into 8 slots: the first 22 are gone before it looks.
    const auto burst = spans("fast-0", 500, 30);
    REQUIRE(writer.write(burst));
    auto expected = ids_of(first);
    const auto burst_ids = ids_of(burst);
    expected.insert(expected.end(), burst_ids.end() - 8, burst_ids.end());
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= expected.size(); }));
    REQUIRE(eventually([&] { return health(port, "xtel_exporter_spans_lost_total") == 22; }));
    CHECK(receiver.span_ids() == expected);
    CHECK(health(port, "xtel_exporter_spans_read_total") == 16);
}

TEST_CASE("xfer_demo's spans reach the traces receiver through xtel-exporter in the caller's trace",
          "[exporter_traces]") {
    temp_dir tmp;
    constexpr std::uint64_t block = 16384;
    constexpr std::size_t transfers = 24;
    const std::string caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    // Every transfer timed and over a threshold of 0: one span each, on the initiator's side.
    const auto demo = xtel_test::run({"env",
                                      "NIXL_TELEMETRY_ENABLE=y",
                                      "NIXL_TELEMETRY_EXPORTER=node",
                                      "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + tmp.path().string(),
                                      "NIXL_TELEMETRY_TIMING_SAMPLE=1",
                                      "NIXL_TELEMETRY_TRACE_SLOW_US=0",
                                      "NIXL_TELEMETRY_TRACE_SAMPLE=0",
                                      "UCX_MEM_MALLOC_HOOKS=no",
                                      "UCX_MEM_EVENTS=no",
                                      XTEL_XFER_DEMO,
                                      "--name",
                                      "e2e",
                                      "--op",
                                      "write",
                                      "--total",
                                      std::to_string(transfers * block),
                                      "--block",
                                      std::to_string(block),
                                      "--depth",
                                      "4",
                                      "--traceparent",
                                      caller});
    INFO(demo.out << demo.err);
    REQUIRE(demo.exit_code == 0);
    trace_receiver receiver;
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    // Both rings were closed by the demo: read to their ends, then let go.
    REQUIRE(eventually([&] {
        return receiver.span_ids().size() >= transfers &&
               health(port, "xtel_exporter_span_files") == 0;
    }));
    const auto got = receiver.spans();
    REQUIRE(got.size() == transfers);
    std::set<std::string> ids;
    for (const pb::Span& s : got) {
        CHECK(trace_receiver::hex(s.trace_id()) == "0af7651916cd43dd8448eb211c80319c");
        CHECK(trace_receiver::hex(s.parent_span_id()) == "b7ad6b7169203331");
        CHECK(s.name() == "write e2e-target");
        CHECK(s.kind() == pb::Span::SPAN_KIND_CLIENT);
        CHECK(s.flags() == 0x301);
        CHECK_FALSE(s.has_status());
        CHECK(s.start_time_unix_nano() <= s.end_time_unix_nano());
        ids.insert(trace_receiver::hex(s.span_id()));
    }
    CHECK(ids.size() == transfers);
    CHECK(receiver.agents() == std::vector<std::string>(transfers, "e2e-initiator"));
    CHECK(health(port, "xtel_exporter_spans_lost_total") == 0);
}
