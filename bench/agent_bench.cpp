// UCX write loops between two agents in this process, with telemetry off and with the buffer
// exporter on: the cost of telemetry measured where it lives, on real transfers.
//
//   BM_ucx_write/<block bytes>/<off|buffer>
//
// The target's memory is allocated by its agent, so UCX writes it directly over shared memory
// (as ucx_perftest does); each iteration posts one write of one block and waits for it. Real
// time is measured, so the flusher thread's share of the machine counts against "buffer".

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "xtel/registry.hpp"

namespace {

/// Blocks the loop cycles through, so that consecutive writes touch different lines.
constexpr std::uint64_t blocks = 64;

class scratch_dir {
  public:
    scratch_dir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "xtel-bench-XXXXXX").string();
        if (::mkdtemp(pattern.data()) != nullptr) {
            path_ = pattern;
        }
    }
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
};

void bm_ucx_write(benchmark::State& state, std::uint64_t block, bool telemetry_on) {
    scratch_dir dir;
    xtel::config cfg;
    cfg.enabled = telemetry_on;
    cfg.exporters = {"buffer"};
    cfg.output_path = dir.path().string();
    cfg.buffer_size = 1 << 16;
    // Flushing every 2 ms into a staging ring of 64 Ki records leaves room for every record
    // even at the ~12 million writes per second of 4 KiB blocks, so "buffer" pays for recording
    // each one rather than for dropping it (the dropped counter shows it did).
    cfg.run_interval = std::chrono::milliseconds(2);
    xtel::agent_options opts;
    opts.telemetry.staging_capacity = 1 << 16;

    auto target = xtel::make_agent("bench_target", cfg, opts);
    auto initiator = xtel::make_agent("bench_initiator", cfg, opts);
    xtel::descriptor remote;
    std::vector<std::byte> local(blocks * block, std::byte{1});
    const auto local_region = xtel::descriptor::dram(local.data(), local.size());
    std::vector<std::byte> blob;
    std::string name;
    if (!target->allocate_memory(blocks * block, remote).ok() ||
        !initiator->register_memory(local_region).ok() || !target->export_metadata(blob).ok() ||
        !initiator->load_remote_metadata(blob, name).ok()) {
        state.SkipWithError("agent set-up failed");
        return;
    }
    std::vector<xtel::transfer_handle> handles(blocks);
    for (std::uint64_t b = 0; b < blocks; ++b) {
        const xtel::descriptor l{local_region.address + b * block, block};
        const xtel::descriptor r{remote.address + b * block, block};
        if (!initiator
                 ->create_transfer(xtel::transfer_op::write, std::span(&l, 1), std::span(&r, 1),
                                   name, handles[b])
                 .ok()) {
            state.SkipWithError("create_transfer failed");
            return;
        }
    }

    std::uint64_t i = 0;
    for (auto _ : state) {
        const xtel::transfer_handle h = handles[i++ & (blocks - 1)];
        xtel::status st = initiator->post(h);
        while (st.code() == xtel::status_code::in_progress) {
            target->progress();
            st = initiator->poll(h);
        }
        if (!st.ok()) [[unlikely]] {
            state.SkipWithError(st.to_string().c_str());
            break;
        }
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * block));
    initiator->flush_telemetry();
    state.counters["dropped"] = static_cast<double>(initiator->stats().records_dropped);
    for (const auto h : handles) {
        (void)initiator->release(h);
    }
}

const bool registered = [] {
    for (const std::uint64_t block : {4096u, 65536u}) {
        for (const bool on : {false, true}) {
            const std::string name =
                "BM_ucx_write/" + std::to_string(block) + "/" + (on ? "buffer" : "off");
            benchmark::RegisterBenchmark(name.c_str(), bm_ucx_write, block, on)->UseRealTime();
        }
    }
    return true;
}();

}  // namespace
