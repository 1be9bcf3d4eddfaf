// Stands in for a node's agents (bench/node_scale.sh): makes AGENTS node files of SERIES series
// each in DIR, with real writers and snapshots made through the node exporter's metric model
// (bench/node_fixture.hpp), then publishes every file again each INTERVAL_MS, as agents flushing,
// until SIGINT or SIGTERM (the writers then mark their files closed).
//
//   xtel_node_files DIR AGENTS SERIES [INTERVAL_MS [model|native]]
//
// `model` counts series as the metric model does; `native` too, with the latency histograms in
// native form (NIXL_TELEMETRY_HISTOGRAM_KIND=native).
//
// Prints one line once every file is published: `ready FILES SERIES_PER_FILE PAYLOAD_BYTES`
// (series in the unit asked for).

#include <signal.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "node_fixture.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace {

std::size_t number(std::string_view text, std::string_view what) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc{} || end != text.data() + text.size() || n == 0) {
        throw std::invalid_argument(
            fmt::format("{} '{}': a positive integer expected", what, text));
    }
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string_view kind = argc == 6 ? std::string_view(argv[5]) : "";
    if (argc < 4 || argc > 6 || (argc == 6 && kind != "model" && kind != "native")) {
        std::fprintf(stderr,
                     "usage: xtel_node_files DIR AGENTS SERIES [INTERVAL_MS [model|native]]\n");
        return 2;
    }
    try {
        const std::filesystem::path dir = argv[1];
        const std::size_t agents = number(argv[2], "AGENTS");
        const std::size_t series = number(argv[3], "SERIES");
        const std::size_t interval_ms = argc >= 5 ? number(argv[4], "INTERVAL_MS") : 1000;
        const auto unit = kind == "model"    ? xtel_bench::series_unit::model
                          : kind == "native" ? xtel_bench::series_unit::native
                                             : xtel_bench::series_unit::time_series;

        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop, nullptr);

        const std::size_t peers = xtel_bench::peers_for_series(series, unit);
        std::vector<std::unique_ptr<xtel::node::file::writer>> writers;
        std::vector<std::vector<std::byte>> payloads(agents);
        std::size_t per_file = 0;
        std::size_t bytes = 0;
        for (std::size_t a = 0; a < agents; ++a) {
            const std::string name = fmt::format("agent-{:03}", a);
            const auto snap = xtel_bench::agent_snapshot(name, peers, unit);
            per_file = xtel_bench::series_of(*snap, unit);
            xtel::metrics::encode_snapshot(*snap, payloads[a]);
            bytes += payloads[a].size();
            writers.push_back(std::make_unique<xtel::node::file::writer>(dir, name));
            writers.back()->publish(payloads[a]);
        }
        std::printf("ready %zu %zu %zu\n", agents, per_file, bytes);
        std::fflush(stdout);

        const timespec wait{static_cast<std::time_t>(interval_ms / 1000),
                            static_cast<long>(interval_ms % 1000) * 1'000'000};
        while (::sigtimedwait(&stop, nullptr, &wait) < 0) {
            for (std::size_t a = 0; a < agents; ++a) {
                writers[a]->publish(payloads[a]);
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel_node_files: %s\n", e.what());
        return 1;
    }
}
