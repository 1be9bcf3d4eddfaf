// Records a few transfers through the pipeline the environment selects, then reads the
// flight recorder back with xtel's reader and prints what it found.

#include <cstdio>
#include <filesystem>

#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: consumer <output directory>\n");
        return 64;
    }
    xtel::config cfg;
    cfg.enabled = true;
    cfg.output_path = argv[1];
    {
        xtel::buffer_telemetry t(cfg, "consumer");
        for (int i = 0; i < 5; ++i) {
            t.record_transfer(xtel::direction::tx, xtel::clock::now_us(), 4096, 1, 1, 2);
        }
    }
    xtel::flight_recorder::reader r(std::filesystem::path(argv[1]) / "consumer");
    std::uint64_t bytes = 0;
    const auto n = r.poll([&](const xtel::event& e) {
        if (e.name_view() == "agent_tx_bytes") {
            bytes += e.value;
        }
    });
    std::printf("consumer: %zu events, %llu tx bytes\n", n, static_cast<unsigned long long>(bytes));
    return n == 20 && bytes == 5 * 4096 ? 0 : 1;
}
