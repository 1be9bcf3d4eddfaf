// UCX write loops between two agents in this process, with telemetry off, with the buffer
// exporter on, and with the Prometheus exporter on, quiet or under attack: the cost of
// telemetry measured where it lives, on real transfers.
//
//   BM_ucx_write/<block bytes>/<off|buffer|prometheus|prometheus_under_attack>
//   BM_ucx_write/<block bytes>/prometheus_attack_paired
//
// prometheus_under_attack runs hostile clients of the agents' endpoint (hostile_clients.hpp)
// during the measurement, with real scrapes among them; its baseline is prometheus. It reports
// the scrapes that got 200 and those that did not, and the share of a core that the endpoint's
// thread and the attacking thread used. On a small shared machine separate cases differ by
// more than the attack costs, so prometheus_attack_paired switches the attack on and off every
// 100 ms within one case and reports the median ratio of neighbouring windows.
//
// The target's memory is allocated by its agent, so UCX writes it directly over shared memory
// (as ucx_perftest does); each iteration posts one write of one block and waits for it. Real
// time is measured, so the flusher thread's share of the machine counts against "buffer".

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "hostile_clients.hpp"
#include "xtel/log.hpp"
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

/// CPU seconds the endpoint's thread ("xtel-metrics") has used; 0 when there is none.
double endpoint_cpu_seconds() {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(task.path() / "comm");
        std::string name;
        std::getline(comm, name);
        if (name != "xtel-metrics") {
            continue;
        }
        std::ifstream stat(task.path() / "stat");
        std::string line;
        std::getline(stat, line);
        // Fields after the ")" that ends the name: state is the 3rd field, utime the 14th.
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        std::string field;
        double ticks = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i >= 14) {
                ticks += std::stod(field);
            }
        }
        return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
    return 0;
}

enum class mode { off, buffer, prometheus, prometheus_under_attack, prometheus_attack_paired };

constexpr const char* mode_name(mode m) {
    switch (m) {
        case mode::off:
            return "off";
        case mode::buffer:
            return "buffer";
        case mode::prometheus:
            return "prometheus";
        case mode::prometheus_under_attack:
            return "prometheus_under_attack";
        case mode::prometheus_attack_paired:
            return "prometheus_attack_paired";
    }
    return "?";
}

void bm_ucx_write(benchmark::State& state, std::uint64_t block, mode m) {
    const bool prometheus = m != mode::off && m != mode::buffer;
    scratch_dir dir;
    xtel::config cfg;
    cfg.enabled = m != mode::off;
    cfg.exporters = {prometheus ? "prometheus" : "buffer"};
    if (prometheus) {
        xtel::set_log_level(xtel::log_level::error);
        ::setenv(xtel::env::prometheus_address, "127.0.0.1:0", 1);
    }
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

    std::unique_ptr<xtel_bench::hostile_clients> attack;
    if (m == mode::prometheus_under_attack || m == mode::prometheus_attack_paired) {
        auto& typed = dynamic_cast<xtel::basic_agent<xtel::prometheus_telemetry>&>(*initiator);
        xtel_bench::hostile_clients::options o;
        o.port = typed.telemetry().get<xtel::prometheus_exporter>().port();
        attack = std::make_unique<xtel_bench::hostile_clients>(o);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the crowd gathers
    }
    // Where the time goes: the endpoint's own thread, over the measurement.
    const double endpoint_cpu_before = prometheus ? endpoint_cpu_seconds() : 0;
    const auto started = std::chrono::steady_clock::now();

    // prometheus_attack_paired: the attack is switched on and off every `window`; each window
    // but its first 20 ms (the switch settling) counts for its side, and each on-window is
    // compared with the off-window before it. Pairs of neighbouring windows see the same load
    // from the rest of the machine, which separate cases, seconds apart, do not.
    using steady = std::chrono::steady_clock;
    constexpr auto window = std::chrono::milliseconds(100);
    constexpr auto settle = std::chrono::milliseconds(20);
    const bool paired = m == mode::prometheus_attack_paired;
    bool attacking = false;
    if (paired) {
        attack->set_active(false);
    }
    auto window_start = steady::now();
    std::uint64_t window_iterations = 0;
    double off_rate = 0;
    std::vector<double> pair_ratios;
    double on_seconds = 0, off_seconds = 0;
    std::uint64_t on_iterations = 0, off_iterations = 0;

    std::uint64_t i = 0;
    for (auto _ : state) {
        if (paired && (i & 63) == 0) {
            const auto now = steady::now();
            if (now - window_start < settle) {
                window_iterations = 0;  // not counted: the switch is settling
            } else if (now - window_start >= window) {
                const double seconds =
                    std::chrono::duration<double>(now - window_start - settle).count();
                const double rate = static_cast<double>(window_iterations) / seconds;
                if (attacking) {
                    on_seconds += seconds;
                    on_iterations += window_iterations;
                    if (off_rate > 0) {
                        pair_ratios.push_back(rate / off_rate);
                    }
                } else {
                    off_seconds += seconds;
                    off_iterations += window_iterations;
                    off_rate = rate;
                }
                attacking = !attacking;
                attack->set_active(attacking);
                window_start = now;
                window_iterations = 0;
            }
        }
        ++window_iterations;
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
    if (prometheus) {
        const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - started;
        state.counters["endpoint_cpu_pct"] =
            100 * (endpoint_cpu_seconds() - endpoint_cpu_before) / wall.count();
    }
    if (paired && !pair_ratios.empty() && off_seconds > 0 && on_seconds > 0) {
        std::sort(pair_ratios.begin(), pair_ratios.end());
        state.counters["attack_pairs"] = static_cast<double>(pair_ratios.size());
        state.counters["attack_ratio_median"] = pair_ratios[pair_ratios.size() / 2];
        state.counters["attack_ratio_overall"] =
            (static_cast<double>(on_iterations) / on_seconds) /
            (static_cast<double>(off_iterations) / off_seconds);
    }
    if (attack) {
        attack->stop();
        state.counters["attacker_cpu_pct"] =
            100 * attack->cpu_seconds() / attack->seconds_running();
        state.counters["scrapes_ok"] = static_cast<double>(attack->scrapes_ok());
        state.counters["scrapes_failed"] = static_cast<double>(attack->scrapes_failed());
        state.counters["hostile_connections"] = static_cast<double>(attack->opened());
        attack.reset();
    }
    initiator->flush_telemetry();
    state.counters["dropped"] = static_cast<double>(initiator->stats().records_dropped);
    for (const auto h : handles) {
        (void)initiator->release(h);
    }
}

const bool registered = [] {
    for (const std::uint64_t block : {4096u, 65536u}) {
        for (const mode m :
             {mode::off, mode::buffer, mode::prometheus, mode::prometheus_under_attack}) {
            const std::string name = "BM_ucx_write/" + std::to_string(block) + "/" + mode_name(m);
            benchmark::RegisterBenchmark(name.c_str(), bm_ucx_write, block, m)->UseRealTime();
        }
        // Long enough for some 20 pairs of 100 ms windows.
        const std::string paired = "BM_ucx_write/" + std::to_string(block) + "/" +
                                   mode_name(mode::prometheus_attack_paired);
        benchmark::RegisterBenchmark(paired.c_str(), bm_ucx_write, block,
                                     mode::prometheus_attack_paired)
            ->UseRealTime()
            ->MinTime(4);
    }
    return true;
}();

}  // namespace
