// A synthetic transfer workload recorded through the pipeline the environment selects:
// threads "transfer" blocks and record what an agent records after each transfer.
//
//   synthetic_demo [--agent NAME] [--threads N] [--transfers N] [--block-size BYTES]

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "xtel/pipelines.hpp"

namespace {

struct options {
    std::string agent = "demo_agent";
    int threads = 2;
    std::uint64_t transfers = 100000;
    std::uint64_t block_size = 65536;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        const char* v = argv[i + 1];
        if (a == "--agent") {
            o.agent = v;
        } else if (a == "--threads") {
            o.threads = std::max(1, std::atoi(v));
        } else if (a == "--transfers") {
            o.transfers = std::strtoull(v, nullptr, 10);
        } else if (a == "--block-size") {
            o.block_size = std::strtoull(v, nullptr, 10);
        } else {
            fmt::print(stderr, "unknown option {}\n", a);
            std::exit(64);
        }
    }
    return o;
}

template <class Telemetry>
void run(Telemetry& t, const options& o) {
    t.set(xtel::category::memory, xtel::names::agent_memory_registered, o.block_size * o.threads);
    const auto start = xtel::clock::monotonic_us();
    std::vector<std::thread> workers;
    for (int w = 0; w < o.threads; ++w) {
        workers.emplace_back([&t, &o, w] {
            for (std::uint64_t i = 0; i < o.transfers; ++i) {
                const auto ts = xtel::clock::now_us();
                t.record_transfer(w % 2 == 0 ? xtel::direction::tx : xtel::direction::rx, ts,
                                  o.block_size, 1, 2 + i % 3, 10 + i % 7);
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    const auto us = std::max<std::uint64_t>(1, xtel::clock::monotonic_us() - start);
    t.set(xtel::category::memory, xtel::names::agent_memory_deregistered, o.block_size * o.threads);
    t.flush();
    const auto s = t.stats();
    fmt::print("agent {}: {} threads x {} transfers of {} bytes recorded in {} us "
               "({:.1f} M transfers/s); {} events exported, {} records dropped\n",
               o.agent, o.threads, o.transfers, o.block_size, us,
               static_cast<double>(o.threads * o.transfers) / us, s.events_exported,
               s.records_dropped);
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    try {
        const auto cfg = xtel::config::from_env();
        if (!cfg.enabled) {
            xtel::disabled_telemetry t(cfg, o.agent);
            run(t, o);
            return 0;
        }
        xtel::buffer_telemetry t(cfg, o.agent);
        fmt::print("flight recorder: {}\n", t.get<xtel::buffer_exporter>().path().string());
        run(t, o);
        return 0;
    } catch (const xtel::error& e) {
        fmt::print(stderr, "synthetic_demo: {}\n", e.what());
        return 1;
    }
}
