// UCX write loops between two agents in this process: the cost of telemetry measured where it
// lives, on real transfers.
//
//   BM_ucx_write/<block bytes>/<off|buffer|prometheus|prometheus_under_attack>
//   BM_ucx_write/<block bytes>/<off_paired|buffer_paired|prometheus_paired>
//   BM_ucx_write/<block bytes>/prometheus_attack_paired
//
// The plain cases run one loop each; their medians are compared across cases. On this small
// shared machine separate cases, seconds apart, differ by more than telemetry costs (runs of
// "off" alone spread over 80-120 ns per 4 KiB write), so the *_paired cases compare within one
// case: they alternate between the baseline and the measured side (every 50 ms; 100 ms under
// attack, so the hostile clients reconnect after each switch) and report the
// median ratio of each measured window to the baseline windows on either side of it, which saw
// the same load from the rest of the machine.
//   buffer_paired, prometheus_paired: initiators with telemetry off against initiators with
//     that exporter, writing the same bytes into the same target, alternately, on one thread.
//     All exist throughout, so flushers and endpoints run (idle) during the off windows too,
//     as they would in a deployment. Eight initiators a side take turns (see bm_ucx_write).
//   off_paired: the same with telemetry off on both sides: the noise floor of the method (its
//     ratio would be 1 with perfect measurement).
//   prometheus_attack_paired: one prometheus pair; hostile clients (hostile_clients.hpp) of its
//     endpoint are switched on and off.
//
// The target's memory is allocated by its agent, so UCX writes it directly over shared memory
// (as ucx_perftest does); each iteration posts one write of one block and waits for it. Real
// time is measured, so the flusher thread's share of the machine counts against telemetry.
// The agents run the deployment defaults (100 ms flushes, timing one transfer in 256).

#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "hostile_clients.hpp"
#include "xtel/agent.hpp"
#include "xtel/basic_agent.hpp"
#include "xtel/log.hpp"

namespace {

/// Blocks the loop cycles through, so that consecutive writes touch different lines.
constexpr std::uint64_t blocks = 64;
/// Initiators a side in the cases against off.
constexpr std::size_t instances = 8;

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

/// The agents' configuration: `exporter` empty means telemetry off. The deployment defaults
/// otherwise; NIXL_TELEMETRY_RUN_INTERVAL and NIXL_TELEMETRY_TIMING_SAMPLE are taken from the
/// environment when set, so `NIXL_TELEMETRY_TIMING_SAMPLE=1 scripts/bench ...` shows what
/// timing every transfer costs.
xtel::config bench_config(const std::string& exporter, const std::filesystem::path& dir) {
    const std::string out = dir.string();
    xtel::config cfg =
        xtel::config::from_env([&](std::string_view var) -> std::optional<std::string> {
            if (var == xtel::env::enable) {
                return exporter.empty() ? "n" : "y";
            }
            if (var == xtel::env::exporter) {
                return exporter.empty() ? "buffer" : exporter;
            }
            if (var == xtel::env::output_path && exporter != "prometheus") {
                return out;  // the flight recorder's directory (prometheus: its address, below)
            }
            if (var == xtel::env::run_interval || var == xtel::env::timing_sample) {
                return xtel::process_env(var);
            }
            return std::nullopt;
        });
    if (exporter == "prometheus") {
        xtel::set_log_level(xtel::log_level::error);
        ::setenv(xtel::env::prometheus_address, "127.0.0.1:0", 1);
    }
    return cfg;
}

/// The target agent (telemetry off: it only progresses) with `blocks` blocks of its own memory,
/// and the source memory every initiator writes from.
class write_target {
  public:
    explicit write_target(std::uint64_t block)
        : block_(block), local_(blocks * block, std::byte{1}) {
        agent_ = xtel::make_agent("bench_target", bench_config("", dir_.path()));
        if (!agent_->allocate_memory(blocks * block, remote_).ok() ||
            !agent_->export_metadata(blob_).ok()) {
            error_ = "target set-up failed";
        }
    }

    const std::string& error() const { return error_; }
    xtel::agent& agent() { return *agent_; }
    std::uint64_t block() const { return block_; }
    const xtel::descriptor& remote() const { return remote_; }
    const std::vector<std::byte>& blob() const { return blob_; }
    xtel::descriptor local() { return xtel::descriptor::dram(local_.data(), local_.size()); }

  private:
    xtel_bench::scratch_dir dir_;
    std::uint64_t block_;
    std::vector<std::byte> local_;
    std::unique_ptr<xtel::agent> agent_;
    xtel::descriptor remote_;
    std::vector<std::byte> blob_;
    std::string error_;
};

/// An initiator agent with `blocks` prepared writes of one block each into the target, from
/// the target's shared source memory: initiators compared with each other move the very same
/// bytes between the very same addresses, and differ only in their telemetry.
class write_loop {
  public:
    /// `exporter` empty: telemetry off.
    write_loop(write_target& target, const std::string& tag, const std::string& exporter)
        : target_(target) {
        initiator_ =
            xtel::make_agent("bench_initiator_" + tag, bench_config(exporter, dir_.path()));
        const xtel::descriptor local = target.local();
        std::string name;
        if (!initiator_->register_memory(local).ok() ||
            !initiator_->load_remote_metadata(target.blob(), name).ok()) {
            error_ = "initiator set-up failed";
            return;
        }
        const std::uint64_t block = target.block();
        handles_.resize(blocks);
        for (std::uint64_t b = 0; b < blocks; ++b) {
            const xtel::descriptor l{local.address + b * block, block};
            const xtel::descriptor r{target.remote().address + b * block, block};
            const xtel::status st = initiator_->create_transfer(
                xtel::transfer_op::write, std::span(&l, 1), std::span(&r, 1), name, handles_[b]);
            if (!st.ok()) {
                error_ = st.to_string();
                return;
            }
        }
    }

    ~write_loop() {
        for (const auto h : handles_) {
            (void)initiator_->release(h);
        }
    }

    write_loop(const write_loop&) = delete;
    write_loop& operator=(const write_loop&) = delete;

    /// Why set-up failed; empty when it did not.
    const std::string& error() const { return error_; }

    /// One write of one block, waited for.
    xtel::status step() {
        const xtel::transfer_handle h = handles_[next_++ & (blocks - 1)];
        xtel::status st = initiator_->post(h);
        while (st.code() == xtel::status_code::in_progress) {
            target_.agent().progress();
            st = initiator_->poll(h);
        }
        return st;
    }

    xtel::agent& initiator() { return *initiator_; }

    /// Flushes and reports what the initiator's pipeline dropped.
    double dropped() {
        initiator_->flush_telemetry();
        return static_cast<double>(initiator_->stats().records_dropped);
    }

  private:
    xtel_bench::scratch_dir dir_;
    write_target& target_;
    std::unique_ptr<xtel::agent> initiator_;
    std::vector<xtel::transfer_handle> handles_;
    std::uint64_t next_ = 0;
    std::string error_;
};

/// Alternates between a baseline side and a measured side every `window` of steady time and
/// keeps each window's rate (iterations per second), leaving out its first `settle` (caches
/// and the switch itself). Call count() every iteration and due() every few.
class alternating_windows {
  public:
    using steady = std::chrono::steady_clock;

    alternating_windows(std::chrono::milliseconds window, std::chrono::milliseconds settle)
        : window_(window), settle_(settle), start_(steady::now()) {}

    bool measuring() const { return measuring_; }
    void count() { ++iterations_; }

    /// True when the side just switched (the caller switches what it runs).
    bool due() {
        const auto now = steady::now();
        if (now - start_ < settle_) {
            iterations_ = 0;
            return false;
        }
        if (now - start_ < window_) {
            return false;
        }
        const double seconds = std::chrono::duration<double>(now - start_ - settle_).count();
        windows_.push_back({measuring_, static_cast<double>(iterations_) / seconds});
        measuring_ = !measuring_;
        start_ = now;
        iterations_ = 0;
        return true;
    }

    /// Each measured window's rate over the mean of the baseline windows on either side,
    /// sorted.
    std::vector<double> ratios() const {
        std::vector<double> out;
        for (std::size_t i = 1; i + 1 < windows_.size(); ++i) {
            if (windows_[i].measured && !windows_[i - 1].measured && !windows_[i + 1].measured) {
                const double base = (windows_[i - 1].rate + windows_[i + 1].rate) / 2;
                if (base > 0) {
                    out.push_back(windows_[i].rate / base);
                }
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    /// Reports the ratios' median and quartiles as counters named <prefix>_ratio_median, ...
    void report(benchmark::State& state, const std::string& prefix) const {
        const std::vector<double> r = ratios();
        if (r.empty()) {
            return;
        }
        state.counters[prefix + "_pairs"] = static_cast<double>(r.size());
        state.counters[prefix + "_ratio_median"] = r[r.size() / 2];
        state.counters[prefix + "_ratio_q1"] = r[r.size() / 4];
        state.counters[prefix + "_ratio_q3"] = r[(3 * r.size()) / 4];
    }

  private:
    struct sample {
        bool measured;
        double rate;
    };
    std::chrono::milliseconds window_;
    std::chrono::milliseconds settle_;
    steady::time_point start_;
    std::uint64_t iterations_ = 0;
    bool measuring_ = false;
    std::vector<sample> windows_;
};

enum class mode {
    off,
    off_paired,
    buffer,
    prometheus,
    prometheus_under_attack,
    buffer_paired,
    prometheus_paired,
    prometheus_attack_paired
};

constexpr const char* mode_name(mode m) {
    switch (m) {
        case mode::off:
            return "off";
        case mode::off_paired:
            return "off_paired";
        case mode::buffer:
            return "buffer";
        case mode::prometheus:
            return "prometheus";
        case mode::prometheus_under_attack:
            return "prometheus_under_attack";
        case mode::buffer_paired:
            return "buffer_paired";
        case mode::prometheus_paired:
            return "prometheus_paired";
        case mode::prometheus_attack_paired:
            return "prometheus_attack_paired";
    }
    return "?";
}

/// The exporter of the loop a mode measures; empty: telemetry off.
std::string exporter_of(mode m) {
    switch (m) {
        case mode::off:
        case mode::off_paired:
            return "";
        case mode::buffer:
        case mode::buffer_paired:
            return "buffer";
        default:
            return "prometheus";
    }
}

void bm_ucx_write(benchmark::State& state, std::uint64_t block, mode m) {
    const bool prometheus = exporter_of(m) == "prometheus";
    const bool attacked = m == mode::prometheus_under_attack || m == mode::prometheus_attack_paired;
    const bool against_off =
        m == mode::off_paired || m == mode::buffer_paired || m == mode::prometheus_paired;
    const bool paired = against_off || m == mode::prometheus_attack_paired;

    write_target target(block);
    if (!target.error().empty()) {
        state.SkipWithError(target.error().c_str());
        return;
    }
    // Against off: `instances` initiators a side, taken in turn, since each pair of agents
    // has a speed of its own (within a few percent: how UCX happened to map the target's
    // memory, say) that one pair per side would mistake for telemetry's cost.
    const std::size_t n = against_off ? instances : 1;
    std::vector<std::unique_ptr<write_loop>> measured, base;
    for (std::size_t k = 0; k < n; ++k) {
        measured.push_back(
            std::make_unique<write_loop>(target, "m" + std::to_string(k), exporter_of(m)));
        if (against_off) {
            base.push_back(std::make_unique<write_loop>(target, "b" + std::to_string(k), ""));
        }
    }
    for (const auto* side : {&measured, &base}) {
        for (const auto& l : *side) {
            if (!l->error().empty()) {
                state.SkipWithError(l->error().c_str());
                return;
            }
        }
    }

    std::unique_ptr<xtel_bench::hostile_clients> attack;
    if (attacked) {
        auto& typed =
            dynamic_cast<xtel::basic_agent<xtel::prometheus_telemetry>&>(measured[0]->initiator());
        xtel_bench::hostile_clients::options o;
        o.port = typed.telemetry().get<xtel::prometheus_exporter>().port();
        attack = std::make_unique<xtel_bench::hostile_clients>(o);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the crowd gathers
    }
    // Where the time goes: the endpoint's own thread, over the measurement.
    const double endpoint_cpu_before = prometheus ? endpoint_cpu_seconds() : 0;
    const auto started = std::chrono::steady_clock::now();

    // Paired: the baseline side first (off, or no attack).
    // Against off: short windows, many of them. Under attack: long enough for the hostile
    // clients to connect again after each switch.
    using ms = std::chrono::milliseconds;
    alternating_windows windows(against_off ? ms(50) : ms(100), against_off ? ms(5) : ms(20));
    write_loop* running = against_off ? base[0].get() : measured[0].get();
    std::size_t turn = 0;
    if (m == mode::prometheus_attack_paired) {
        attack->set_active(false);
    }
    std::uint64_t i = 0;
    for (auto _ : state) {
        if (paired) {
            windows.count();
            if ((++i & 63) == 0 && windows.due()) {
                if (against_off) {
                    if (windows.measuring()) {
                        running = measured[turn % n].get();
                    } else {
                        running = base[++turn % n].get();
                    }
                } else {
                    attack->set_active(windows.measuring());
                }
            }
        }
        const xtel::status st = running->step();
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
    if (paired) {
        windows.report(state, against_off ? "telemetry" : "attack");
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
    double dropped = 0;
    for (const auto& l : measured) {
        dropped += l->dropped();
    }
    state.counters["dropped"] = dropped;
    {
        double exported = 0;
        for (const auto& l : measured) {
            exported += static_cast<double>(l->initiator().stats().events_exported);
        }
        state.counters["events_per_iteration"] = exported / static_cast<double>(state.iterations());
    }
}

const bool registered = [] {
    for (const std::uint64_t block : {4096u, 65536u}) {
        for (const mode m :
             {mode::off, mode::buffer, mode::prometheus, mode::prometheus_under_attack}) {
            const std::string name = "BM_ucx_write/" + std::to_string(block) + "/" + mode_name(m);
            benchmark::RegisterBenchmark(name.c_str(), bm_ucx_write, block, m)->UseRealTime();
        }
        // Long enough for some 40 measured windows of 50 ms between baseline ones.
        for (const mode m : {mode::off_paired, mode::buffer_paired, mode::prometheus_paired,
                             mode::prometheus_attack_paired}) {
            const std::string name = "BM_ucx_write/" + std::to_string(block) + "/" + mode_name(m);
            benchmark::RegisterBenchmark(name.c_str(), bm_ucx_write, block, m)
                ->UseRealTime()
                ->MinTime(4);
        }
    }
    return true;
}();

}  // namespace
