// What xtel's NIXL plug-in does per event on NIXL's flush thread (issue 47, item 6), against
// prometheus-cpp making the same updates, in neighbouring windows (paired_windows.hpp).
//
// BM_nixl_flush_paired/<batch>: the plug-in's exporter made as NIXL makes it, by the creator
// its nixl_telemetry_plugin_init returns (the objects libtelemetry_exporter_xtel.so is made of,
// linked in), and driven as NIXL's flush drives it, through the ABI's vtable (abi_v2.hpp):
// onBatchBegin, `batch` events, onBatchEnd. The events are whole completed transfers, four
// each in NIXL 1.5.1's order (post time, transfer time, tx bytes, tx requests), with the values
// record_one_transfer gives xtel's pipelines. On the other side the same events go through the
// same vtable into prometheus-cpp (prometheus_cpp_peer.hpp) behind an exporter of that ABI,
// whose exportEvent makes the event's one update, as NIXL's Prometheus exporter does: a counter
// incremented or a histogram observed. Each window is events_a_window events; a pair gives the
// plug-in's time over the peer's ("peer"), and the case reports its median and quartiles, and
// xtel_ns and peer_ns, the medians per event.
//
// The batches come back to back, far more often than NIXL's flushes (every
// NIXL_TELEMETRY_RUN_INTERVAL), and the plug-in makes a round of them at most every 100 ms
// (xtel_exporter::default_round_interval): the per-event cost. BM_nixl_flush_paired/64/round
// makes a round of every batch (an exporter built with round_interval 0): what a round costs,
// spread over a batch of 64 events.

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "nixl/xtel_exporter.hpp"
#include "paired_windows.hpp"
#include "prometheus_cpp_peer.hpp"
#include "xtel/core/log.hpp"
#include "xtel/nixl/abi_v2.hpp"

extern "C" xtel::nixl::abi_v2::plugin* nixl_telemetry_plugin_init();

namespace {

namespace abi = xtel::nixl::abi_v2;
using xtel_bench::window_ns;

/// Events a window: a window of the harness's other paired cases holds 4,096 transfers.
constexpr std::int64_t events_a_window = 4096;

/// prometheus-cpp behind NIXL's exporter ABI: each event its one update.
class prometheus_cpp_exporter final : public abi::exporter {
  public:
    explicit prometheus_cpp_exporter(const abi::init_params& params) : abi::exporter(params) {}

    abi::status export_event(const abi::event& e) override {
        const auto v = static_cast<double>(e.value);
        switch (e.type) {
            case abi::event_type::tx_bytes:
                peer_.add_bytes(v);
                break;
            case abi::event_type::tx_requests_num:
                peer_.add_requests(v);
                break;
            case abi::event_type::xfer_time:
                peer_.observe_xfer_time(v);
                break;
            case abi::event_type::xfer_post_time:
                peer_.observe_post_time(v);
                break;
            default:
                break;
        }
        return abi::status::success;
    }

    double requests() const { return peer_.requests(); }

  private:
    xtel_bench::prometheus_cpp_agent peer_;
};

/// The four events of completed transfer i, in NIXL 1.5.1's order.
void transfer_events(std::uint64_t i, abi::event* out) {
    out[0] = {abi::event_type::xfer_post_time, i & 7};
    out[1] = {abi::event_type::xfer_time, i & 63};
    out[2] = {abi::event_type::tx_bytes, 65536};
    out[3] = {abi::event_type::tx_requests_num, 1};
}

/// A window's events handed to `e` as NIXL's flush hands them, `batch` a batch. Not inlined,
/// and aligned, as the harness's other windows are (xtel_bench::record_window).
[[gnu::noinline, gnu::aligned(64)]] void flush_window(abi::exporter& e,
                                                      const std::vector<abi::event>& events,
                                                      std::int64_t batch) {
    for (std::size_t at = 0; at < events.size(); at += static_cast<std::size_t>(batch)) {
        abi::exporter_access::begin(e);
        for (std::int64_t k = 0; k < batch; ++k) {
            e.export_event(events[at + static_cast<std::size_t>(k)]);
        }
        abi::exporter_access::end(e);
    }
}

/// The plug-in's exporter for `agent`, made by its creator as NIXL's loader makes it, its node
/// file in `dir`.
std::unique_ptr<abi::exporter> make_xtel_exporter(const std::string& agent,
                                                  const xtel_bench::scratch_dir& dir) {
    ::setenv("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().c_str(), 1);
    const abi::plugin* plugin = nixl_telemetry_plugin_init();
    return plugin->create_exporter(abi::init_params{agent, 4096});
}

void BM_nixl_flush_paired(benchmark::State& state, std::int64_t batch, bool round_a_batch) {
    xtel::set_log_level(xtel::log_level::warning);
    const xtel_bench::scratch_dir dir;
    std::unique_ptr<abi::exporter> xtel = make_xtel_exporter("bench-nixl", dir);
    if (round_a_batch) {
        xtel.reset();
        xtel = std::make_unique<xtel::nixl::xtel_exporter>(
            abi::init_params{"bench-nixl", 4096}, xtel::process_env, std::chrono::milliseconds(0));
    }
    const auto* plugin = dynamic_cast<const xtel::nixl::xtel_exporter*>(xtel.get());
    prometheus_cpp_exporter peer(abi::init_params{"bench-nixl", 4096});
    std::vector<abi::event> events(events_a_window);
    std::uint64_t i = 0;
    std::vector<double> ratio;
    std::vector<double> xtel_ns;
    std::vector<double> peer_ns;
    xtel_bench::alternate_windows(
        state,
        [&] {
            for (std::int64_t k = 0; k < events_a_window; k += 4) {
                transfer_events(++i, &events[static_cast<std::size_t>(k)]);
            }
            return xtel_bench::time_window([&] { flush_window(*xtel, events, batch); }, [] {});
        },
        [&] { return xtel_bench::time_window([&] { flush_window(peer, events, batch); }, [] {}); },
        [&](const window_ns& ours, const window_ns& theirs) {
            if (theirs.records > 0) {
                ratio.push_back(ours.records / theirs.records);
                xtel_ns.push_back(ours.records / events_a_window);
                peer_ns.push_back(theirs.records / events_a_window);
            }
        });
    state.counters["xtel_ns"] = xtel_bench::median_of(xtel_ns);
    state.counters["peer_ns"] = xtel_bench::median_of(peer_ns);
    // Both sides counted every transfer (the peer's requests are the windows' transfers) and
    // the plug-in dropped none: the cost measured is of events taken, not refused.
    state.counters["dropped"] = plugin ? static_cast<double>(plugin->events_dropped()) : -1.0;
    state.counters["peer_requests_per_transfer"] =
        peer.requests() / static_cast<double>(state.iterations() * events_a_window / 4);
    std::sort(ratio.begin(), ratio.end());
    xtel_bench::report_window_ratios(
        state, "BM_nixl_flush_paired/" + std::to_string(batch) + (round_a_batch ? "/round" : ""),
        "peer", ratio);
    state.SetItemsProcessed(2 * events_a_window * state.iterations());
}
const bool registered = [] {
    benchmark::RegisterBenchmark("BM_nixl_flush_paired/64", BM_nixl_flush_paired, 64, false);
    benchmark::RegisterBenchmark("BM_nixl_flush_paired/4096", BM_nixl_flush_paired, 4096, false);
    benchmark::RegisterBenchmark("BM_nixl_flush_paired/64/round", BM_nixl_flush_paired, 64, true);
    return true;
}();

}  // namespace
