// examples/minimal/pipeline.cpp: an engine with its own transport records what it moves into
// the telemetry pipeline NIXL_TELEMETRY_* ask for.
#include <cstdio>
#include <exception>
#include <string_view>

#include "xtel/core/clock.hpp"
#include "xtel/core/names.hpp"
#include "xtel/registry/runtime_telemetry.hpp"  // the pipeline interface and make_telemetry

int main(int argc, char** argv) try {
    if (argc > 1) {  // no options: the NIXL_TELEMETRY_* variables configure its telemetry
        const bool help =
            std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h";
        std::fprintf(help ? stdout : stderr,
                     "usage: %s (no options; NIXL_TELEMETRY_* configure it)\n", argv[0]);
        return help ? 0 : 2;
    }
    // Records nothing unless NIXL_TELEMETRY_ENABLE=y; then, by default, into the flight recorder
    // /dev/shm/engine-0 (NIXL_TELEMETRY_EXPORTER and _OUTPUT_PATH choose otherwise).
    auto telemetry = xtel::make_telemetry("engine-0");
    telemetry->set(xtel::category::memory, xtel::names::agent_memory_registered, 1 << 30);

    // One 1 MiB send that your transport posted in 12 us and completed 340 us later.
    telemetry->record_transfer(xtel::direction::tx, xtel::clock::now_us(), 1 << 20, 1, 12, 340);
    telemetry->flush();  // now, rather than at the next NIXL_TELEMETRY_RUN_INTERVAL
    return 0;
} catch (const xtel::config_error& e) {  // a NIXL_TELEMETRY_* variable with a bad value
    std::fprintf(stderr, "configuration: %s\n", e.what());
    return 2;
} catch (const std::exception& e) {  // an exporter that could not start (a file, a port)
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
