// The agent's spans end to end: xfer_demo processes and in-process agents over UCX write the
// transfers that become spans into `<agent>.spans` beside their node files, read back with the
// real reader; the counts the node file serves agree with the ring.

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exporter_support.hpp"
#include "prometheus_support.hpp"
#include "test_util.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

namespace spans_test {

namespace tr = xtel::trace;
namespace sr = xtel::trace::span_ring;
using xtel_test::temp_dir;

namespace {

constexpr std::uint64_t block = 16384;
const std::string caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

std::vector<sr::span_record> read_spans(const std::filesystem::path& path) {
    sr::reader r(path);
    std::vector<sr::span_record> out;
    while (r.read(out).copied > 0) {
    }
    CHECK(r.lost() == 0);
    return out;
}

/// The value of the counter `family`{reason=`reason`} in the agent's node file.
std::optional<std::uint64_t> span_counter(const std::filesystem::path& node_file,
                                          std::string_view family,
                                          std::string_view reason) {
    xtel::node::file::reader r(node_file);
    const auto p = r.read_latest();
    REQUIRE(p);
    const auto snap = xtel::metrics::decode_snapshot(p->payload);
    for (const auto& f : snap.families) {
        if (f.spec.name != family) {
            continue;
        }
        for (const auto& s : f.series) {
            if (s.label_values == std::vector<std::string>{std::string(reason)}) {
                return s.value;
            }
        }
    }
    return std::nullopt;
}

/// xfer_demo moving `transfers` blocks once, initiator and target in one process named
/// `name`-initiator and `name`-target, publishing into `dir`, with `env` and `extra` options.
xtel_test::run_result run_demo(const temp_dir& dir,
                               const std::string& name,
                               std::uint64_t transfers,
                               const std::vector<std::string>& env,
                               const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {"env",
                                     "NIXL_TELEMETRY_ENABLE=y",
                                     "NIXL_TELEMETRY_EXPORTER=node",
                                     "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + dir.path().string(),
                                     "NIXL_TELEMETRY_TIMING_SAMPLE=1",
                                     "UCX_MEM_MALLOC_HOOKS=no",
                                     "UCX_MEM_EVENTS=no"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), {XTEL_XFER_DEMO, "--name", name, "--op", "write", "--total",
                             std::to_string(transfers * block), "--block", std::to_string(block),
                             "--depth", "4"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto r = xtel_test::run(argv);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
}

}  // namespace

TEST_CASE(
    "with the threshold at 0 and every transfer timed, xfer_demo's initiator writes one "
    "span per transfer in the caller's trace, under the caller's span",
    "[spans]") {
    const temp_dir dir;
    run_demo(dir, "tp", 32, {"NIXL_TELEMETRY_TRACE_SLOW_US=0", "NIXL_TELEMETRY_TRACE_SAMPLE=0"},
             {"--traceparent", caller});
    const auto spans = read_spans(dir.path() / "tp-initiator.spans");
    REQUIRE(spans.size() == 32);
    std::set<std::string> ids;
    for (const auto& s : spans) {
        CHECK(tr::to_hex(s.trace) == "0af7651916cd43dd8448eb211c80319c");
        CHECK(tr::to_hex(s.parent) == "b7ad6b7169203331");
        CHECK(s.reason == static_cast<std::uint8_t>(tr::span_reason::slow));
        CHECK(s.kind == static_cast<std::uint8_t>(sr::side::initiator));
        CHECK(s.operation == static_cast<std::uint8_t>(xtel::transfer_op::write));
        CHECK(s.status == 0);
        CHECK(s.bytes == block);
        CHECK(s.descriptors == 1);  // one block, one descriptor each side
        CHECK(s.lanes >= 1);        // the lanes of the connection, as UCX reports them
        CHECK(s.start_us <= s.end_us);
        CHECK(sr::text(s.agent) == "tp-initiator");
        CHECK(sr::text(s.remote_agent) == "tp-target");
        CHECK(sr::text(s.request_id) == caller);
        ids.insert(tr::to_hex(s.span));
    }
    CHECK(ids.size() == 32);
    // The target moved nothing itself: its ring is there, empty.
    CHECK(read_spans(dir.path() / "tp-target.spans").empty());
    // What the agent serves agrees with its ring.
    const auto node = dir.path() / "tp-initiator.metrics";
    CHECK(span_counter(node, "xtel_trace_spans_total", "slow") == 32);
    CHECK(span_counter(node, "xtel_trace_spans_total", "sampled") == 0);
    CHECK(span_counter(node, "xtel_trace_spans_dropped_total", "budget") == 0);
    CHECK(span_counter(node, "xtel_trace_spans_dropped_total", "ring") == 0);
}

TEST_CASE("each latency exemplar of xfer_demo's initiator names the span it wrote for its transfer",
          "[spans]") {
    const temp_dir dir;
    run_demo(dir, "ex", 32, {"NIXL_TELEMETRY_TRACE_SLOW_US=0", "NIXL_TELEMETRY_TRACE_SAMPLE=0"},
             {"--traceparent", caller});
    std::map<std::string, sr::span_record> by_id;
    for (const auto& s : read_spans(dir.path() / "ex-initiator.spans")) {
        by_id.emplace(tr::to_hex(s.span), s);
    }
    REQUIRE(by_id.size() == 32);

    xtel::node::file::reader r(dir.path() / "ex-initiator.metrics");
    const auto p = r.read_latest();
    REQUIRE(p);
    auto snap =
        std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::decode_snapshot(p->payload));
    std::size_t checked = 0;
    for (const auto& f : snap->families) {
        if (f.spec.name != "xtel_transfer_duration_seconds" &&
            f.spec.name != "agent_xfer_time_us") {
            continue;
        }
        for (const auto& s : f.series) {
            for (const auto& e : s.exemplars) {
                if (e.label_value.empty()) {
                    continue;
                }
                INFO(f.spec.name << " exemplar " << e.label_value << " at " << e.timestamp_us);
                CHECK(e.label_value == caller);
                CHECK(tr::to_hex(e.trace_id) == "0af7651916cd43dd8448eb211c80319c");
                const auto span = by_id.find(tr::to_hex(e.span_id));
                REQUIRE(span != by_id.end());
                // The span of that very transfer: it ended when the exemplar was observed, and
                // lasted what the exemplar's value says.
                CHECK(span->second.end_us == e.timestamp_us);
                CHECK(span->second.end_us - span->second.start_us == e.value);
                ++checked;
            }
        }
    }
    CHECK(checked >= 1);

    // As Prometheus reads it: both ids, then the request id (65 + 63 characters, the limit).
    std::string om;
    const std::shared_ptr<const xtel::metrics::snapshot> snaps[] = {snap};
    xtel::metrics::render(snaps, om, xtel::metrics::exposition::openmetrics);
    const std::string labels = R"( # {trace_id="0af7651916cd43dd8448eb211c80319c",span_id=")";
    const auto at = om.find(labels);
    REQUIRE(at != std::string::npos);
    const auto span_hex = om.substr(at + labels.size(), 16);
    CHECK(by_id.count(span_hex) == 1);
    CHECK(om.substr(at + labels.size() + 16, 16 + caller.size()) ==
          "\",request_id=\"" + caller + "\"}");
}

TEST_CASE(
    "a real Prometheus scraping xtel-exporter stores latency exemplars that name the caller's "
    "trace and the span of their transfer",
    "[spans][exporter]") {
    if (std::string_view(XTEL_PROMETHEUS).empty()) {
        WARN("SKIPPED: prometheus was not found when configuring (Debian package prometheus)");
        return;
    }
    const temp_dir dir;
    run_demo(dir, "pe", 64, {"NIXL_TELEMETRY_TRACE_SLOW_US=0", "NIXL_TELEMETRY_TRACE_SAMPLE=0"},
             {"--traceparent", caller});
    std::set<std::string> span_ids;
    for (const auto& s : read_spans(dir.path() / "pe-initiator.spans")) {
        span_ids.insert(tr::to_hex(s.span));
    }
    REQUIRE(span_ids.size() == 64);
    // The demo has closed its files: xtel-exporter serves them for its --stale-ttl.
    auto exporter = exporter_it::start_exporter(dir.path(), {"--stale-ttl", "600"});
    const int port = prom_it::served_port(exporter);
    REQUIRE(port > 0);
    prom_it::prometheus_server prom(dir.path() / "prometheus", fmt::format("127.0.0.1:{}", port),
                                    {"--enable-feature=exemplar-storage"});
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const auto path =
        fmt::format("/api/v1/query_exemplars?query={}&start={}&end={}",
                    prom_it::percent_encode(
                        R"(xtel_transfer_duration_seconds_bucket{agent_name="pe-initiator"})"),
                    now - 600, now + 600);
    const auto answer = prom.poll(path, [](const std::string& body) {
        return body.find("\"span_id\":\"") != std::string::npos;
    });
    INFO("last answer: " << answer);
    INFO("prometheus log:\n" << prom_it::read_file(prom.log));
    // Each exemplar's labels, as Prometheus's JSON lists them: {"trace_id":..,"span_id":..,
    // "request_id":..}.
    std::size_t seen = 0;
    for (std::size_t at = 0; (at = answer.find("\"span_id\":\"", at)) != std::string::npos;) {
        const auto id = answer.substr(at + 11, 16);
        CHECK(span_ids.count(id) == 1);
        const auto labels_start = answer.rfind('{', at);
        const auto labels = answer.substr(labels_start, answer.find('}', at) - labels_start);
        CHECK(labels.find(R"("trace_id":"0af7651916cd43dd8448eb211c80319c")") != std::string::npos);
        CHECK(labels.find(R"("request_id":")" + caller + "\"") != std::string::npos);
        ++seen;
        at += 11;
    }
    CHECK(seen >= 1);
}

TEST_CASE("fast transfers become spans exactly when their request id's trace is head-sampled",
          "[spans]") {
    const temp_dir dir;
    constexpr std::uint64_t transfers = 400;
    run_demo(dir, "hs", transfers,
             {"NIXL_TELEMETRY_TRACE_SLOW_US=3600000000", "NIXL_TELEMETRY_TRACE_SAMPLE=0.25"},
             {"--request-id-prefix", "hs-req-"});
    // The decision is the trace id's alone: this test predicts it transfer by transfer.
    const std::uint64_t threshold = tr::sample_threshold(0.25);
    std::set<std::string> expected;
    for (std::uint64_t n = 0; n < transfers; ++n) {
        const std::string id = fmt::format("hs-req-{}", n);
        if (tr::head_sampled(tr::derive_trace_id(id), threshold)) {
            expected.insert(id);
        }
    }
    const auto spans = read_spans(dir.path() / "hs-initiator.spans");
    std::set<std::string> got;
    for (const auto& s : spans) {
        CHECK(s.reason == static_cast<std::uint8_t>(tr::span_reason::sampled));
        CHECK(s.trace == tr::derive_trace_id(sr::text(s.request_id)));
        got.insert(std::string(sr::text(s.request_id)));
    }
    CHECK(spans.size() == got.size());
    CHECK(got == expected);
    // A quarter, give or take what 400 draws allow (3 standard deviations: 26).
    CHECK(expected.size() >= 74);
    CHECK(expected.size() <= 126);
    CHECK(span_counter(dir.path() / "hs-initiator.metrics", "xtel_trace_spans_total", "sampled") ==
          expected.size());
}

TEST_CASE(
    "spans over the agent's budget are dropped, and counted with the written ones to every "
    "transfer",
    "[spans]") {
    const temp_dir dir;
    constexpr std::uint64_t transfers = 300;
    run_demo(dir, "bg", transfers,
             {"NIXL_TELEMETRY_TRACE_SLOW_US=0", "NIXL_TELEMETRY_TRACE_BUDGET=10"});
    const auto spans = read_spans(dir.path() / "bg-initiator.spans");
    const auto node = dir.path() / "bg-initiator.metrics";
    const auto written = span_counter(node, "xtel_trace_spans_total", "slow");
    const auto dropped = span_counter(node, "xtel_trace_spans_dropped_total", "budget");
    REQUIRE(written);
    REQUIRE(dropped);
    CHECK(*written == spans.size());
    CHECK(spans.size() >= 10);  // the bucket starts full
    CHECK(*dropped > 0);
    CHECK(*written + *dropped == transfers);
}

TEST_CASE("NIXL_TELEMETRY_TRACE_BUDGET=0 makes no span ring and no span families", "[spans]") {
    const temp_dir dir;
    run_demo(dir, "off", 4, {"NIXL_TELEMETRY_TRACE_SLOW_US=0", "NIXL_TELEMETRY_TRACE_BUDGET=0"});
    CHECK(std::filesystem::exists(dir.path() / "off-initiator.metrics"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "off-initiator.spans"));
    CHECK_FALSE(
        span_counter(dir.path() / "off-initiator.metrics", "xtel_trace_spans_total", "slow"));
}

TEST_CASE("a bad trace variable stops xfer_demo with one message naming it", "[spans]") {
    const temp_dir dir;
    const auto r = xtel_test::run({"env", "NIXL_TELEMETRY_ENABLE=y", "NIXL_TELEMETRY_EXPORTER=node",
                                   "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + dir.path().string(),
                                   "NIXL_TELEMETRY_TRACE_SAMPLE=half", XTEL_XFER_DEMO, "--total",
                                   "16K", "--block", "16K"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("NIXL_TELEMETRY_TRACE_SAMPLE='half' is invalid"));
}

TEST_CASE(
    "xfer_demo with --traceparent says whether the head sample keeps its trace and which "
    "variable decides",
    "[spans]") {
    // With the default sample (0.01) it sent no span for the trace it was given, and said
    // nothing of why. The caller's trace id's last 7 bytes, 0x48eb211c80319c, are 0.28 of
    // 2^56: below the default's threshold (0.99 of it), at or above which a trace is sampled.
    // No transfer takes an hour: none is slow.
    const temp_dir dir;
    const auto unsampled = run_demo(dir, "hs", 4, {"NIXL_TELEMETRY_TRACE_SLOW_US=3600000000"},
                                    {"--traceparent", caller});
    CHECK(xtel_test::count_of(unsampled.out,
                              "xfer_demo: trace 0af7651916cd43dd8448eb211c80319c is not in the "
                              "head sample (NIXL_TELEMETRY_TRACE_SAMPLE=0.01): only its failed "
                              "transfers and those slower than "
                              "NIXL_TELEMETRY_TRACE_SLOW_US=3600000000 us become spans; "
                              "NIXL_TELEMETRY_TRACE_SAMPLE=1 makes every one a span\n") == 1);
    CHECK(read_spans(dir.path() / "hs-initiator.spans").empty());
    // The line's advice, taken: every transfer a span.
    const temp_dir all;
    const auto sampled =
        run_demo(all, "hs", 4, {"NIXL_TELEMETRY_TRACE_SAMPLE=1"}, {"--traceparent", caller});
    CHECK(xtel_test::count_of(sampled.out,
                              "xfer_demo: trace 0af7651916cd43dd8448eb211c80319c is in the head "
                              "sample (NIXL_TELEMETRY_TRACE_SAMPLE=1): every transfer of it "
                              "becomes a span\n") == 1);
    CHECK(read_spans(all.path() / "hs-initiator.spans").size() == 4);
    // Without --traceparent, nothing is said.
    const temp_dir plain;
    CHECK(run_demo(plain, "hs", 4, {}).out.find("head sample") == std::string::npos);
}

TEST_CASE("xfer_demo refuses a --traceparent that is not one", "[spans]") {
    const auto r = xtel_test::run({XTEL_XFER_DEMO, "--traceparent", "00-abc-def-01"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--traceparent '00-abc-def-01' is invalid"));
}

TEST_CASE("a transfer that fails becomes a span in its caller's trace with the failure's status",
          "[spans]") {
    const temp_dir dir;
    const xtel_test::scoped_env sample("NIXL_TELEMETRY_TRACE_SAMPLE", "0");
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {"node"};
    cfg.output_path = dir.path().string();
    cfg.run_interval = std::chrono::milliseconds(20);
    xtel::agent_options opts;
    opts.transfer_timeout = std::chrono::milliseconds(50);
    auto target = xtel::make_agent("target", xtel::config{}, opts);
    {
        auto initiator = xtel::make_agent("failing", cfg, opts);
        std::vector<std::byte> remote(1 << 20), local(1 << 20);
        REQUIRE(target->register_memory(xtel::descriptor::dram(remote.data(), remote.size())).ok());
        REQUIRE(
            initiator->register_memory(xtel::descriptor::dram(local.data(), local.size())).ok());
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string name;
        REQUIRE(initiator->load_remote_metadata(blob, name).ok());
        const auto l = xtel::descriptor::dram(local.data(), local.size());
        const auto r = xtel::descriptor::dram(remote.data(), remote.size());
        xtel::transfer_handle h;
        REQUIRE(initiator
                    ->create_transfer(xtel::transfer_op::write, std::span(&l, 1), std::span(&r, 1),
                                      "target", h, {caller})
                    .ok());
        // The target never progresses: the write outlives the 50 ms deadline.
        REQUIRE(initiator->post(h).code() == xtel::status_code::in_progress);
        xtel::status st = initiator->poll(h);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (st.code() == xtel::status_code::in_progress &&
               std::chrono::steady_clock::now() < give_up) {
            st = initiator->poll(h);
        }
        REQUIRE(st.code() == xtel::status_code::timed_out);
        CHECK(initiator->release(h).ok());
    }
    const auto spans = read_spans(dir.path() / "failing.spans");
    REQUIRE(spans.size() == 1);
    CHECK(spans[0].reason == static_cast<std::uint8_t>(tr::span_reason::failed));
    CHECK(spans[0].status == static_cast<std::uint8_t>(xtel::status_code::timed_out));
    CHECK(tr::to_hex(spans[0].trace) == "0af7651916cd43dd8448eb211c80319c");
    CHECK(tr::to_hex(spans[0].parent) == "b7ad6b7169203331");
    CHECK(sr::text(spans[0].remote_agent) == "target");
    CHECK(span_counter(dir.path() / "failing.metrics", "xtel_trace_spans_total", "failed") == 1);
}

}  // namespace spans_test
