// A stand-in for xfer_demo in the Prometheus tests: records a known amount of transmitted
// bytes through the pipeline NIXL_TELEMETRY_EXPORTER names (prometheus or buffer,prometheus),
// then keeps the endpoint up until stdin closes or the linger time ends.
//
//   xtel_prometheus_workload [--agent NAME] [--transfers N] [--block-size BYTES]
//                            [--linger-ms MS]

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "xtel/pipelines.hpp"

namespace {

struct options {
    std::string agent = "workload";
    std::uint64_t transfers = 1000;
    std::uint64_t block_size = 65536;
    int linger_ms = 60000;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        const char* v = argv[i + 1];
        if (a == "--agent") {
            o.agent = v;
        } else if (a == "--transfers") {
            o.transfers = std::strtoull(v, nullptr, 10);
        } else if (a == "--block-size") {
            o.block_size = std::strtoull(v, nullptr, 10);
        } else if (a == "--linger-ms") {
            o.linger_ms = std::atoi(v);
        } else {
            fmt::print(stderr, "unknown option {}\n", a);
            std::exit(64);
        }
    }
    return o;
}

/// Returns when stdin reaches end of file or after `ms`.
void linger(int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) {
            return;
        }
        pollfd p{STDIN_FILENO, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) > 0) {
            char buf[256];
            if (::read(STDIN_FILENO, buf, sizeof buf) <= 0) {
                return;
            }
        }
    }
}

template <class Telemetry>
int run(const xtel::config& cfg, const options& o) {
    Telemetry t(cfg, o.agent);
    t.set(xtel::category::memory, xtel::names::agent_memory_registered, o.block_size);
    for (std::uint64_t i = 0; i < o.transfers; ++i) {
        t.record_transfer(xtel::direction::tx, xtel::clock::now_us(), o.block_size, 1, 3,
                          20 + i % 50);
    }
    t.flush();
    fmt::print("recorded tx_bytes={}\n", o.transfers * o.block_size);
    std::fflush(stdout);
    linger(o.linger_ms);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    try {
        const auto cfg = xtel::config::from_env();
        const auto exporters = cfg.exporters_string();
        if (cfg.enabled && exporters == "prometheus") {
            return run<xtel::prometheus_telemetry>(cfg, o);
        }
        if (cfg.enabled && exporters == "buffer,prometheus") {
            return run<xtel::buffer_prometheus_telemetry>(cfg, o);
        }
        fmt::print(stderr,
                   "xtel_prometheus_workload: set NIXL_TELEMETRY_ENABLE=y and "
                   "NIXL_TELEMETRY_EXPORTER to prometheus or buffer,prometheus\n");
        return 64;
    } catch (const xtel::error& e) {
        fmt::print(stderr, "xtel_prometheus_workload: {}\n", e.what());
        return 1;
    }
}
