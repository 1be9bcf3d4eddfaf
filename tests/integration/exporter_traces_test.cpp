// xtel-exporter's OTLP traces, with real parts: span rings written by the real writer
// (xtel::trace::span_ring::writer) or by xfer_demo's agents into a directory, xtel-exporter
// started on it with the OpenTelemetry variables pointing at the OTLP receiver of tests/otlp,
// which decodes with the OpenTelemetry JS project's generated protobuf types, not with anything of
// ours. Every check is of the exact spans written: their ids, each once.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exporter_support.hpp"
#include "otlp_receiver.hpp"
#include "prometheus_support.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

namespace exporter_traces_test {

using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::count_of;
using xtel_test::temp_dir;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace ring = xtel::trace::span_ring;

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

/// One line of the receiver's spans.jsonl (tests/otlp/README.md: its keys always present, in one
/// order), read with plain string operations: the values xtel writes have no quotes or escapes.
class span_line {
  public:
    explicit span_line(std::string line) : line_(std::move(line)) {}

    /// The span's own field `key` (after the resource): a string's text, else the JSON token.
    std::string field(std::string_view key) const {
        return value_at(line_.find(fmt::format(R"("{}":)", key), line_.find(R"("traceId":)")),
                        key.size() + 3);
    }
    /// The span's attribute `key`, as the receiver writes it (a string); empty when absent.
    std::string attribute(std::string_view key) const {
        const auto attributes = line_.find(R"("attributes":)", line_.find(R"("traceId":)"));
        return value_at(line_.find(fmt::format(R"("{}":)", key), attributes), key.size() + 3);
    }
    /// The resource's attribute `key`; empty when absent.
    std::string resource(std::string_view key) const {
        return value_at(line_.find(fmt::format(R"("{}":)", key), line_.find(R"("resource":)")),
                        key.size() + 3);
    }
    const std::string& text() const { return line_; }

  private:
    std::string value_at(std::size_t at, std::size_t skip) const {
        if (at == std::string::npos) {
            return {};
        }
        at += skip;
        if (line_[at] == '"') {
            return line_.substr(at + 1, line_.find('"', at + 1) - at - 1);
        }
        return line_.substr(at, line_.find_first_of(",}", at) - at);
    }

    std::string line_;
};

/// The OTLP receiver of tests/otlp, with the spans it recorded.
class otlp_receiver : public otlp_it::receiver_process {
  public:
    using receiver_process::receiver_process;

    std::string url() const { return endpoint() + "/v1/traces"; }

    /// The spans of every request answered 200, in arrival order.
    std::vector<span_line> spans() const {
        std::vector<span_line> out;
        std::istringstream in(file("spans.jsonl"));
        for (std::string line; std::getline(in, line);) {
            out.emplace_back(line);
        }
        return out;
    }
    std::vector<std::string> span_ids() const {
        std::vector<std::string> out;
        for (const auto& s : spans()) {
            out.push_back(s.field("spanId"));
        }
        return out;
    }
    /// Each span's resource's xtel.agent.name, in arrival order.
    std::vector<std::string> agents() const {
        std::vector<std::string> out;
        for (const auto& s : spans()) {
            out.push_back(s.resource("xtel.agent.name"));
        }
        return out;
    }
    /// How many POSTs were answered `status` (attempts.txt).
    std::size_t answered(int status) const {
        return count_of(file("attempts.txt"), fmt::format("\t{}\t", status));
    }
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

/// The caller's W3C traceparent that xfer_demo's transfers are tagged with, and its parts.
const std::string caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const std::string caller_trace = "0af7651916cd43dd8448eb211c80319c";
const std::string caller_span = "b7ad6b7169203331";
constexpr std::uint64_t pair_block = 16384;

}  // namespace

TEST_CASE("xtel-exporter exports exactly the spans a ring holds, each once, as OTLP protobuf",
          "[exporter_traces]") {
    temp_dir tmp;
    temp_dir received;
    otlp_receiver receiver(received.path());
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
    const auto sent = health(port, "xtel_exporter_otlp_traces_requests_sent_total");
    CHECK(sent >= 1);
    CHECK(receiver.answered(200) == sent);
    CHECK(count_of(receiver.file("requests.jsonl"), R"("encoding":"protobuf")") == sent);
}

TEST_CASE("xtel-exporter exports a ring's spans as OTLP JSON with their hex ids",
          "[exporter_traces]") {
    temp_dir tmp;
    temp_dir received;
    otlp_receiver receiver(received.path());
    ring::writer writer(tmp.path(), "decode-3", 64);
    const auto written = spans("decode-3", 5, 25);
    REQUIRE(writer.write(written));
    auto exporter = start_traces_exporter(tmp.path(), receiver.url(), "http/json");
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually(
        [&] { return health(port, "xtel_exporter_spans_queued_total") == written.size(); }));
    // What is checked, waited for: the receiver holding the spans (the exporter's page alone
    // once let the test go on before their request was sent).
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= written.size(); }));
    REQUIRE(
        eventually([&] { return health(port, "xtel_exporter_otlp_traces_requests_queued") == 0; }));
    // The receiver refuses JSON that breaks OTLP's rules (ids in hex, 64-bit integers as
    // strings, no unknown keys) with a 400: none here, and every span decoded.
    CHECK(receiver.file("errors.txt").empty());
    CHECK(receiver.span_ids() == ids_of(written));
    CHECK(receiver.agents() == std::vector<std::string>(written.size(), "decode-3"));
    const auto requests = receiver.file("requests.jsonl");
    CHECK(count_of(requests, R"("encoding":"json")") ==
          health(port, "xtel_exporter_otlp_traces_requests_sent_total"));
    CHECK(count_of(requests, R"("encoding":"protobuf")") == 0);
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

    temp_dir received;
    otlp_receiver late(received.path(), receiver_port);
    REQUIRE(eventually([&] { return late.span_ids().size() >= expected.size(); }));
    REQUIRE(
        eventually([&] { return health(port, "xtel_exporter_otlp_traces_requests_queued") == 0; }));
    CHECK(late.span_ids() == expected);
    CHECK(late.answered(200) == health(port, "xtel_exporter_otlp_traces_requests_sent_total"));
    CHECK(health(port, "xtel_exporter_otlp_traces_requests_dropped_total") == 0);
    CHECK(health(port, "xtel_exporter_otlp_traces_requests_rejected_total") == 0);
}

TEST_CASE("spans answered 503 are retried until the receiver takes them, none lost or sent twice",
          "[exporter_traces]") {
    temp_dir tmp;
    constexpr int failures = 3;
    temp_dir received;
    otlp_receiver receiver(received.path(), 0,
                           {"--fail", std::to_string(failures), "--retry-after", "1"});
    ring::writer writer(tmp.path(), "prefill-2", 256);
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    std::vector<std::string> expected;
    // Three batches, each its own poll, while the receiver answers 503: queued behind the first.
    for (std::uint32_t batch = 0; batch < 3; ++batch) {
        const auto s = spans("prefill-2", 100 * (batch + 1), 20);
        REQUIRE(writer.write(s));
        for (const auto& id : ids_of(s)) {
            expected.push_back(id);
        }
        REQUIRE(eventually(
            [&] { return health(port, "xtel_exporter_spans_queued_total") == expected.size(); }));
    }
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= expected.size(); }));
    REQUIRE(
        eventually([&] { return health(port, "xtel_exporter_otlp_traces_requests_queued") == 0; }));
    std::this_thread::sleep_for(1s);
    CHECK(receiver.span_ids() == expected);
    CHECK(receiver.answered(503) == failures);
    CHECK(health(port, "xtel_exporter_otlp_traces_failed_attempts_total") == failures);
    CHECK(receiver.answered(200) == health(port, "xtel_exporter_otlp_traces_requests_sent_total"));
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
    temp_dir received;
    otlp_receiver receiver(received.path());
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
        return health(
                   port,
                   R"(xtel_exporter_files_refused_total{kind="span_ring",reason="foreign_owner"})") ==
               1;
    }));
    // Polls go on; the refusal is counted once, not once a poll.
    std::this_thread::sleep_for(1500ms);
    CHECK(health(port,
                 R"(xtel_exporter_files_refused_total{kind="span_ring",reason="foreign_owner"})") ==
          1);
    // The directory's one scanner refused it, counted as a span file's refusal only.
    CHECK(prom_it::value_of(
              prom_it::scrape(port),
              R"(xtel_exporter_files_refused_total{kind="node_file",reason="foreign_owner"} )") ==
          "0");
    CHECK(receiver.span_ids() == ids_of(mine));
    CHECK(health(port, "xtel_exporter_span_files") == 1);
}

TEST_CASE("a ring made again under its name is read from its start, the old one's spans kept",
          "[exporter_traces]") {
    temp_dir tmp;
    temp_dir received;
    otlp_receiver receiver(received.path());
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
    temp_dir received;
    otlp_receiver receiver(received.path());
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
    temp_dir received;
    otlp_receiver receiver(received.path());
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
    for (const span_line& s : got) {
        INFO(s.text());
        CHECK(s.field("traceId") == caller_trace);
        CHECK(s.field("parentSpanId") == caller_span);
        CHECK(s.field("name") == "write e2e-target");
        CHECK(s.field("kind") == "3");     // SPAN_KIND_CLIENT
        CHECK(s.field("flags") == "769");  // 0x301: sampled, the parent remote and known so
        CHECK(s.field("status") == "null");
        CHECK(std::stoull(s.field("start")) <= std::stoull(s.field("end")));
        CHECK(s.attribute("xtel.transfer.bytes") == std::to_string(block));
        ids.insert(s.field("spanId"));
    }
    CHECK(ids.size() == transfers);
    CHECK(receiver.agents() == std::vector<std::string>(transfers, "e2e-initiator"));
    CHECK(health(port, "xtel_exporter_spans_lost_total") == 0);
}

namespace {

/// xfer_demo as one of two processes (`role` target or initiator) of the pair `name`, writing
/// `transfers` blocks through the metadata file in `dir`, publishing node files and span rings
/// into `dir`, with `env` on top; the initiator tags every transfer with `caller`, and with
/// `notify` notifies the target of each.
spawn_options pair_options(const temp_dir& dir,
                           const std::string& name,
                           const std::string& role,
                           std::uint64_t transfers,
                           std::vector<std::pair<std::string, std::string>> env,
                           bool notify = false) {
    spawn_options o;
    o.argv = {XTEL_XFER_DEMO,
              "--role",
              role,
              "--metadata",
              (dir.path() / "metadata").string(),
              "--name",
              name,
              "--op",
              "write",
              "--total",
              std::to_string(transfers * pair_block),
              "--block",
              std::to_string(pair_block),
              "--depth",
              "4",
              "--timeout",
              "30"};
    if (role == "initiator") {
        o.argv.insert(o.argv.end(), {"--traceparent", caller});
    }
    if (notify) {
        o.argv.emplace_back("--notify");
    }
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_EXPORTER", "node"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"},
             {"UCX_MEM_MALLOC_HOOKS", "no"},
             {"UCX_MEM_EVENTS", "no"}};
    o.env.insert(o.env.end(), env.begin(), env.end());
    o.unset = exporter_it::rank_variables;
    o.output_path = dir.path() / (role + ".log");
    return o;
}

/// The sum of the series of `family` in an exposition `body` whose labels contain every one of
/// `parts` (agent_name="...", reason="...").
std::uint64_t series_sum(const std::string& body,
                         std::string_view family,
                         const std::vector<std::string>& parts) {
    std::uint64_t sum = 0;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with(fmt::format("{}{{", family))) {
            continue;
        }
        bool all = true;
        for (const auto& p : parts) {
            all = all && line.find(p) != std::string::npos;
        }
        if (all) {
            sum += std::stoull(line.substr(line.rfind(' ') + 1));
        }
    }
    return sum;
}

}  // namespace

TEST_CASE(
    "xfer_demo in two processes under a caller's traceparent has one span per transfer at the "
    "receiver on each side, each in the caller's trace, naming the peer and its bytes",
    "[exporter_traces]") {
    temp_dir tmp;
    constexpr std::uint64_t transfers = 40;
    temp_dir received;
    otlp_receiver receiver(received.path());
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    // The target first: it writes the metadata file the initiator waits for. Notified of each
    // write, it keeps the span of every one whose trace is head-sampled: all, at 1.
    child_process target(pair_options(tmp, "pair", "target", transfers,
                                      {{"NIXL_TELEMETRY_TRACE_SAMPLE", "1"}}, true));
    child_process initiator(pair_options(tmp, "pair", "initiator", transfers,
                                         {{"NIXL_TELEMETRY_TIMING_SAMPLE", "1"},
                                          {"NIXL_TELEMETRY_TRACE_SLOW_US", "0"},
                                          {"NIXL_TELEMETRY_TRACE_SAMPLE", "0"}},
                                         true));
    INFO("initiator:\n"
         << xtel_test::read_file(tmp.path() / "initiator.log") << "target:\n"
         << xtel_test::read_file(tmp.path() / "target.log"));
    REQUIRE(initiator.wait(60s) == 0);
    REQUIRE(target.wait(60s) == 0);
    // Both agents have gone: their rings are read to their ends, then let go.
    REQUIRE(eventually([&] {
        return receiver.span_ids().size() >= 2 * transfers &&
               health(port, "xtel_exporter_span_files") == 0;
    }));
    const auto got = receiver.spans();
    REQUIRE(got.size() == 2 * transfers);
    std::set<std::string> ids;
    std::size_t initiator_spans = 0;
    std::size_t target_spans = 0;
    for (const span_line& s : got) {
        INFO(s.text());
        // Both sides in the caller's trace, under the caller's span: the target learnt it from
        // the notification, without talking to the caller.
        CHECK(s.field("traceId") == caller_trace);
        CHECK(s.field("parentSpanId") == caller_span);
        CHECK(s.attribute("xtel.transfer.bytes") == std::to_string(pair_block));
        if (s.resource("xtel.agent.name") == "pair-initiator") {
            ++initiator_spans;
            CHECK(s.field("name") == "write pair-target");
            CHECK(s.attribute("xtel.peer.agent") == "pair-target");
            CHECK(s.field("kind") == "3");  // SPAN_KIND_CLIENT
        } else {
            ++target_spans;
            CHECK(s.resource("xtel.agent.name") == "pair-target");
            CHECK(s.attribute("xtel.peer.agent") == "pair-initiator");
            CHECK(s.field("kind") == "2");  // SPAN_KIND_SERVER
        }
        ids.insert(s.field("spanId"));
    }
    CHECK(initiator_spans == transfers);
    CHECK(target_spans == transfers);
    CHECK(ids.size() == 2 * transfers);
    CHECK(ids.count(caller_span) == 0);
    CHECK(health(port, "xtel_exporter_spans_lost_total") == 0);
}

TEST_CASE(
    "with a small trace budget the receiver holds exactly the spans the agent counts written, "
    "and those with the ones it dropped add up to the transfers",
    "[exporter_traces]") {
    temp_dir tmp;
    constexpr std::uint64_t transfers = 300;
    temp_dir received;
    otlp_receiver receiver(received.path());
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    child_process target(pair_options(tmp, "bg", "target", transfers, {}));
    child_process initiator(pair_options(tmp, "bg", "initiator", transfers,
                                         {{"NIXL_TELEMETRY_TIMING_SAMPLE", "1"},
                                          {"NIXL_TELEMETRY_TRACE_SLOW_US", "0"},
                                          {"NIXL_TELEMETRY_TRACE_SAMPLE", "0"},
                                          {"NIXL_TELEMETRY_TRACE_BUDGET", "10"}}));
    INFO("initiator:\n"
         << xtel_test::read_file(tmp.path() / "initiator.log") << "target:\n"
         << xtel_test::read_file(tmp.path() / "target.log"));
    REQUIRE(initiator.wait(60s) == 0);
    REQUIRE(target.wait(60s) == 0);
    const std::vector<std::string> agent{R"(agent_name="bg-initiator")"};
    const std::vector<std::string> budget{R"(agent_name="bg-initiator")", R"(reason="budget")"};
    std::uint64_t written = 0;
    std::uint64_t dropped = 0;
    const std::string body = prom_it::scrape_until(port, [&](const std::string& b) {
        written = series_sum(b, "xtel_trace_spans_total", agent);
        dropped = series_sum(b, "xtel_trace_spans_dropped_total", budget);
        return written + dropped == transfers;
    });
    INFO(body);
    CHECK(written + dropped == transfers);
    CHECK(written >= 10);  // the bucket starts full
    CHECK(dropped > 0);
    REQUIRE(eventually([&] { return receiver.span_ids().size() >= written; }));
    std::this_thread::sleep_for(1500ms);
    const auto got = receiver.spans();
    CHECK(got.size() == written);
    std::set<std::string> ids;
    for (const span_line& s : got) {
        CHECK(s.field("traceId") == caller_trace);
        ids.insert(s.field("spanId"));
    }
    CHECK(ids.size() == got.size());
    CHECK(health(port, "xtel_exporter_spans_lost_total") == 0);
}

TEST_CASE(
    "fast transfers reach the receiver exactly when their request id's trace is head-sampled, "
    "about the sampled fraction of them",
    "[exporter_traces]") {
    temp_dir tmp;
    constexpr std::uint64_t transfers = 400;
    constexpr std::uint64_t block = 16384;
    const auto demo = xtel_test::run({"env",
                                      "NIXL_TELEMETRY_ENABLE=y",
                                      "NIXL_TELEMETRY_EXPORTER=node",
                                      "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + tmp.path().string(),
                                      "NIXL_TELEMETRY_TIMING_SAMPLE=1",
                                      "NIXL_TELEMETRY_TRACE_SLOW_US=3600000000",
                                      "NIXL_TELEMETRY_TRACE_SAMPLE=0.25",
                                      "UCX_MEM_MALLOC_HOOKS=no",
                                      "UCX_MEM_EVENTS=no",
                                      XTEL_XFER_DEMO,
                                      "--name",
                                      "rate",
                                      "--op",
                                      "write",
                                      "--total",
                                      std::to_string(transfers * block),
                                      "--block",
                                      std::to_string(block),
                                      "--request-id-prefix",
                                      "rate-req-"});
    INFO(demo.out << demo.err);
    REQUIRE(demo.exit_code == 0);
    // The decision is the trace id's alone, so the test predicts it transfer by transfer.
    const std::uint64_t threshold = xtel::trace::sample_threshold(0.25);
    std::set<std::string> expected;
    for (std::uint64_t n = 0; n < transfers; ++n) {
        const std::string id = fmt::format("rate-req-{}", n);
        if (xtel::trace::head_sampled(xtel::trace::derive_trace_id(id), threshold)) {
            expected.insert(id);
        }
    }
    // A quarter, give or take three standard deviations of 400 draws (26).
    CHECK(expected.size() >= 74);
    CHECK(expected.size() <= 126);

    temp_dir received;
    otlp_receiver receiver(received.path());
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually([&] {
        return receiver.span_ids().size() >= expected.size() &&
               health(port, "xtel_exporter_span_files") == 0;
    }));
    std::set<std::string> got;
    const auto spans = receiver.spans();
    for (const span_line& s : spans) {
        INFO(s.text());
        CHECK(s.attribute("xtel.span.reason") == "sampled");
        const auto id = s.attribute("xtel.request_id");
        CHECK(s.field("traceId") == xtel::trace::to_hex(xtel::trace::derive_trace_id(id)));
        got.insert(id);
    }
    CHECK(spans.size() == got.size());
    CHECK(got == expected);
}

TEST_CASE("every failed transfer reaches the receiver as an error span in its caller's trace",
          "[exporter_traces]") {
    temp_dir tmp;
    constexpr int failures = 3;
    {
        // Sampling off: only the failures become spans.
        const xtel_test::scoped_env sample("NIXL_TELEMETRY_TRACE_SAMPLE", "0");
        xtel::config cfg;
        cfg.enabled = true;
        cfg.exporters = {"node"};
        cfg.output_path = tmp.path().string();
        cfg.run_interval = std::chrono::milliseconds(20);
        xtel::agent_options opts;
        opts.transfer_timeout = std::chrono::milliseconds(50);
        auto initiator = xtel::make_agent("failing", cfg, opts);
        std::vector<std::byte> local(1 << 20);
        REQUIRE(
            initiator->register_memory(xtel::descriptor::dram(local.data(), local.size())).ok());
        const auto l = xtel::descriptor::dram(local.data(), local.size());
        // A target of its own for each: a timed-out write leaves its peer's endpoint failed.
        for (int i = 0; i < failures; ++i) {
            const std::string peer = fmt::format("quiet-{}", i);
            auto target = xtel::make_agent(peer, xtel::config{}, opts);
            std::vector<std::byte> remote(1 << 20);
            REQUIRE(
                target->register_memory(xtel::descriptor::dram(remote.data(), remote.size())).ok());
            std::vector<std::byte> blob;
            REQUIRE(target->export_metadata(blob).ok());
            std::string name;
            REQUIRE(initiator->load_remote_metadata(blob, name).ok());
            const auto r = xtel::descriptor::dram(remote.data(), remote.size());
            xtel::transfer_handle h;
            REQUIRE(initiator
                        ->create_transfer(xtel::transfer_op::write, std::span(&l, 1),
                                          std::span(&r, 1), peer, h, {caller})
                        .ok());
            // The target never progresses: the write outlives the 50 ms deadline.
            REQUIRE(initiator->post(h).code() == xtel::status_code::in_progress);
            xtel::status st = initiator->poll(h);
            const auto give_up = std::chrono::steady_clock::now() + 10s;
            while (st.code() == xtel::status_code::in_progress &&
                   std::chrono::steady_clock::now() < give_up) {
                st = initiator->poll(h);
            }
            REQUIRE(st.code() == xtel::status_code::timed_out);
            CHECK(initiator->release(h).ok());
        }
    }
    temp_dir received;
    otlp_receiver receiver(received.path());
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually([&] {
        return receiver.span_ids().size() >= failures &&
               health(port, "xtel_exporter_span_files") == 0;
    }));
    const auto spans = receiver.spans();
    REQUIRE(spans.size() == failures);
    for (const span_line& s : spans) {
        INFO(s.text());
        CHECK(s.resource("xtel.agent.name") == "failing");
        CHECK(s.field("traceId") == caller_trace);
        CHECK(s.field("parentSpanId") == caller_span);
        CHECK(s.attribute("xtel.span.reason") == "failed");
        CHECK(s.attribute("xtel.transfer.status") == "timed_out");
        CHECK(s.attribute("error.type") == "timed_out");
        // One local and one remote descriptor: one RMA operation; over the lanes its
        // connection had.
        CHECK(s.attribute("xtel.transfer.descriptors") == "1");
        CHECK_FALSE(s.attribute("xtel.transfer.lanes").empty());
        CHECK(s.field("status") == R"({"code":2)");  // STATUS_CODE_ERROR, then its message
    }
}

TEST_CASE("a file named like a span ring that is not one is refused in one line naming it once",
          "[exporter_traces]") {
    temp_dir tmp;
    temp_dir received;
    otlp_receiver receiver(received.path());
    const auto garbage = tmp.path() / "garbage-0.spans";
    prom_it::write_file(garbage, std::string(4096, 'x'));
    auto exporter = start_traces_exporter(tmp.path(), receiver.url());
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    REQUIRE(eventually([&] {
        return health(
                   port,
                   R"(xtel_exporter_files_refused_total{kind="span_ring",reason="not_span_file"})") ==
               1;
    }));
    exporter.read_line("no such line", 300ms);
    INFO(exporter.output());
    CHECK(count_of(exporter.output(), garbage.string()) == 1);
    CHECK(count_of(exporter.output(), "span file " + garbage.string() + ": ") == 1);
}

namespace {

/// The first ```sh block of docs/otlp.md after `heading`, as the doc shows it.
std::string doc_block_after(std::string_view heading) {
    const std::string doc = xtel_test::read_file(fs::path(XTEL_SOURCE_DIR) / "docs/otlp.md");
    const std::size_t at = doc.find(heading);
    REQUIRE(at != std::string::npos);
    const std::size_t open = doc.find("```sh\n", at);
    REQUIRE(open != std::string::npos);
    const std::size_t body = open + 6;
    return doc.substr(body, doc.find("```", body) - body);
}

/// `text` with every `from` replaced by `to`; at least one must be there.
std::string replaced(std::string text, std::string_view from, std::string_view to) {
    std::size_t n = 0;
    for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
        text.replace(at, from.size(), to);
        ++n;
    }
    REQUIRE(n > 0);
    return text;
}

}  // namespace

TEST_CASE("docs/otlp.md's command that produces spans, run as written, sends its trace's spans",
          "[exporter_traces]") {
    // Only the doc's placeholders change: the collector's address and the build directory.
    temp_dir received;
    otlp_receiver receiver(received.path());
    std::string script = doc_block_after("### Which transfers become spans");
    script = replaced(script, "http://127.0.0.1:4318", receiver.endpoint());
    script = replaced(script, "build/release/", std::string(XTEL_BINARY_DIR) + "/");
    temp_dir scratch;
    const auto shell =
        xtel_test::run({"env", "TMPDIR=" + scratch.path().string(), "UCX_MEM_MALLOC_HOOKS=no",
                        "UCX_MEM_EVENTS=no", "bash", "-euc", script});
    INFO("the block:\n" << script << "\nits output:\n" << shell.out << shell.err);
    REQUIRE(shell.exit_code == 0);
    // What the doc says under it: 32 transfers of 64 KiB, each a span of the traceparent's
    // trace, under its span, sent before the exporter is stopped.
    const auto got = receiver.spans();
    CHECK(got.size() == 32);
    for (const span_line& s : got) {
        INFO(s.text());
        CHECK(s.field("traceId") == "0af7651916cd43dd8448eb211c80319c");
        CHECK(s.field("parentSpanId") == "b7ad6b7169203331");
        CHECK(s.attribute("xtel.transfer.bytes") == "65536");
    }
    CHECK(count_of(shell.out + shell.err,
                   "is in the head sample (NIXL_TELEMETRY_TRACE_SAMPLE=1)") == 1);
}

}  // namespace exporter_traces_test
