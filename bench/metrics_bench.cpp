// The metrics processor on the flusher thread: what it costs per transfer record to group a
// batch by attribute set and run the builders once per group (BM_processor/<builders>), and
// how that grows when every record of a batch has attributes of its own (/distinct).

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "xtel/metrics/builders/comprehensive.hpp"
#include "xtel/metrics/builders/legacy.hpp"
#include "xtel/metrics/builders/time.hpp"
#include "xtel/metrics/processor.hpp"

namespace {

using namespace xtel::metrics;

constexpr std::size_t batch_size = 4096;

/// A batch as the flusher hands it over: `groups` distinct attribute sets (peers x READ/WRITE),
/// interleaved, each transfer 64 KiB.
std::vector<xtel::transfer_record> make_batch(xtel::label_table& labels, std::size_t groups) {
    std::vector<xtel::label_id> peers;
    for (std::size_t p = 0; p < (groups + 1) / 2; ++p) {
        peers.push_back(labels.intern(fmt::format("decode-{}", p)));
    }
    const auto ucx = labels.intern("ucx");
    std::vector<xtel::transfer_record> batch(batch_size);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        auto& r = batch[i];
        const std::size_t g = i % groups;
        r.timestamp_us = 1'700'000'000'000'000 + i;
        r.bytes = 65536;
        r.requests = 1;
        r.post_us = i & 7;
        r.xfer_us = i & 63;
        r.attrs.backend = ucx;
        r.attrs.remote_agent = peers[g / 2];
        r.attrs.op = g % 2 == 0 ? xtel::transfer_op::write : xtel::transfer_op::read;
        r.dir = g % 2 == 0 ? xtel::direction::tx : xtel::direction::rx;
    }
    return batch;
}

template <class Processor>
void run_processor(benchmark::State& state, std::size_t groups) {
    xtel::label_table labels;
    const auto batch = make_batch(labels, groups);
    Processor p({"bench", "host"}, default_attributes(), {.max_series = 100000});
    for (auto _ : state) {
        p.process(batch, labels);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch.size()));
    state.counters["groups"] = static_cast<double>(groups);
}

void BM_processor_legacy(benchmark::State& state) {
    run_processor<processor<legacy_builder>>(state, 16);
}
BENCHMARK(BM_processor_legacy)->Name("BM_processor/legacy");

void BM_processor_comprehensive(benchmark::State& state) {
    run_processor<processor<comprehensive_builder>>(state, 16);
}
BENCHMARK(BM_processor_comprehensive)->Name("BM_processor/comprehensive");

void BM_processor_time(benchmark::State& state) {
    run_processor<processor<time_builder>>(state, 16);
}
BENCHMARK(BM_processor_time)->Name("BM_processor/time");

using all_builders = processor<legacy_builder, comprehensive_builder, time_builder>;

void BM_processor_all(benchmark::State& state) {
    run_processor<all_builders>(state, 16);
}
BENCHMARK(BM_processor_all)->Name("BM_processor/legacy_comprehensive_time");

/// Every record of the batch its own attribute set (4096 peers): the worst case for grouping,
/// within the cache of normalized data.
void BM_processor_all_distinct(benchmark::State& state) {
    run_processor<all_builders>(state, batch_size);
}
BENCHMARK(BM_processor_all_distinct)->Name("BM_processor/legacy_comprehensive_time/distinct");

}  // namespace
