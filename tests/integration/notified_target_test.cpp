// The target's side of notified transfers, end to end: two agents over UCX in this process,
// each publishing a node file and a span ring; the target counts the transfers the initiator
// notified it of in xtel_notified_{transfers,bytes}_total, not in its own transfer families, and
// writes one span per transfer, of kind target, in the initiator's trace.

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"

namespace notified_target_test {

namespace tr = xtel::trace;
namespace sr = xtel::trace::span_ring;
using xtel_test::temp_dir;

namespace {

const std::string caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// The value of `family`{`labels`} in the agent's node file; nullopt when it has no such series.
std::optional<std::uint64_t> node_value(const std::filesystem::path& node_file,
                                        std::string_view family,
                                        const std::vector<std::string>& labels) {
    xtel::node::file::reader r(node_file);
    const auto p = r.read_latest();
    REQUIRE(p);
    const auto snap = xtel::metrics::decode_snapshot(p->payload);
    for (const auto& f : snap.families) {
        if (f.spec.name != family) {
            continue;
        }
        for (const auto& s : f.series) {
            if (s.label_values == labels) {
                return s.value;
            }
        }
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE(
    "a target counts the writes it is notified of under their initiator and spans each in the "
    "initiator's trace",
    "[notification][spans]") {
    const temp_dir dir;
    const xtel_test::scoped_env sample("NIXL_TELEMETRY_TRACE_SAMPLE", "1");
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = {"node"};
    cfg.output_path = dir.path().string();
    cfg.timing_sample = 1;
    constexpr std::size_t block = 65536;
    constexpr int transfers = 8;
    {
        auto target = xtel::make_agent("target", cfg);
        auto initiator = xtel::make_agent("initiator", cfg);
        std::vector<std::byte> remote(block), local(block, std::byte{7});
        const auto l = xtel::descriptor::dram(local.data(), local.size());
        const auto r = xtel::descriptor::dram(remote.data(), remote.size());
        REQUIRE(target->register_memory(r).ok());
        REQUIRE(initiator->register_memory(l).ok());
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string name;
        REQUIRE(initiator->load_remote_metadata(blob, name).ok());
        xtel::transfer_handle h;
        REQUIRE(initiator
                    ->create_transfer(xtel::transfer_op::write, std::span(&l, 1), std::span(&r, 1),
                                      "target", h, {.request_id = caller, .notify = true})
                    .ok());
        for (int i = 0; i < transfers; ++i) {
            xtel::status st = initiator->post(h);
            while (st.code() == xtel::status_code::in_progress) {
                target->progress();
                st = initiator->poll(h);
            }
            REQUIRE(st.ok());
        }
        std::vector<xtel::notification> got;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (got.size() < transfers && std::chrono::steady_clock::now() < give_up) {
            REQUIRE(target->get_notifications(got).ok());
            initiator->progress();
        }
        REQUIRE(got.size() == transfers);
        CHECK(initiator->release(h).ok());
    }  // both agents flush and publish on their way out

    const auto node = dir.path() / "target.metrics";
    CHECK(node_value(node, "xtel_notified_transfers_total", {"write", "initiator"}) == transfers);
    CHECK(node_value(node, "xtel_notified_bytes_total", {"write", "initiator"}) ==
          transfers * block);
    // Not the target's own transfers: its transfer families count none.
    CHECK(node_value(node, "xtel_transfer_duration_seconds", {"write", "initiator"}) ==
          std::nullopt);
    // The initiator counts its own writes, not notified ones.
    CHECK(node_value(dir.path() / "initiator.metrics", "xtel_notified_transfers_total",
                     {"write", "target"}) == std::nullopt);

    sr::reader reader(dir.path() / "target.spans");
    std::vector<sr::span_record> spans;
    while (reader.read(spans).copied > 0) {
    }
    REQUIRE(spans.size() == transfers);
    for (const auto& s : spans) {
        CHECK(s.kind == static_cast<std::uint8_t>(sr::side::target));
        CHECK(tr::to_hex(s.trace) == "0af7651916cd43dd8448eb211c80319c");
        CHECK(tr::to_hex(s.parent) == "b7ad6b7169203331");
        CHECK(s.reason == static_cast<std::uint8_t>(tr::span_reason::sampled));
        CHECK(s.bytes == block);
        CHECK(sr::text(s.agent) == "target");
        CHECK(sr::text(s.remote_agent) == "initiator");
    }
}

TEST_CASE(
    "two xfer_demo processes with --notify: the target's node file counts the initiator's writes "
    "or reads and its ring spans each in the caller's trace",
    "[notification][spans]") {
    // read: the prefill/decode pattern, the decode side reading the blocks the prefill side
    // registered and announced in its metadata, then notifying it of each read.
    const std::string op = GENERATE("write", "read");
    INFO("--op " << op);
    const temp_dir dir;
    const std::vector<std::string> env{"env",
                                       "NIXL_TELEMETRY_ENABLE=y",
                                       "NIXL_TELEMETRY_EXPORTER=node",
                                       "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=" + dir.path().string(),
                                       "NIXL_TELEMETRY_TRACE_SAMPLE=1",
                                       "UCX_MEM_MALLOC_HOOKS=no",
                                       "UCX_MEM_EVENTS=no",
                                       XTEL_XFER_DEMO};
    const std::vector<std::string> common{"--metadata", (dir.path() / "md").string(),
                                          "--op",       op,
                                          "--total",    "1M",
                                          "--block",    "64K",
                                          "--notify",   "--timeout",
                                          "20"};
    std::vector<std::string> target_args = env;
    target_args.insert(target_args.end(), {"--role", "target", "--target-memory", "registered"});
    target_args.insert(target_args.end(), common.begin(), common.end());
    const pid_t target =
        xtel_test::spawn(target_args, dir.path() / "target.out", dir.path() / "target.err");
    std::vector<std::string> initiator_args = env;
    initiator_args.insert(initiator_args.end(), {"--role", "initiator", "--traceparent", caller});
    initiator_args.insert(initiator_args.end(), common.begin(), common.end());
    const auto initiator = xtel_test::run(initiator_args);
    int status = 0;
    ::waitpid(target, &status, 0);
    INFO("initiator:\n"
         << initiator.out << initiator.err << "target:\n"
         << xtel_test::read_file(dir.path() / "target.out")
         << xtel_test::read_file(dir.path() / "target.err"));
    REQUIRE(initiator.exit_code == 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    // 16 transfers of 64 KiB.
    constexpr std::uint64_t transfers = 16;
    constexpr std::uint64_t block = 65536;
    REQUIRE(initiator.out.find("notified 'xfer_target' of 16 transfers, 1048576 bytes") !=
            std::string::npos);

    const auto node = dir.path() / "xfer_target.metrics";
    CHECK(node_value(node, "xtel_notified_transfers_total", {op, "xfer_initiator"}) == transfers);
    CHECK(node_value(node, "xtel_notified_bytes_total", {op, "xfer_initiator"}) ==
          transfers * block);
    sr::reader reader(dir.path() / "xfer_target.spans");
    std::vector<sr::span_record> spans;
    while (reader.read(spans).copied > 0) {
    }
    REQUIRE(spans.size() == transfers);
    for (const auto& s : spans) {
        CHECK(s.kind == static_cast<std::uint8_t>(sr::side::target));
        CHECK(tr::to_hex(s.trace) == "0af7651916cd43dd8448eb211c80319c");
        CHECK(tr::to_hex(s.parent) == "b7ad6b7169203331");
        CHECK(s.bytes == block);
        CHECK(s.operation == static_cast<std::uint8_t>(op == "read" ? xtel::transfer_op::read
                                                                    : xtel::transfer_op::write));
        CHECK(sr::text(s.remote_agent) == "xfer_initiator");
    }
}

}  // namespace notified_target_test
