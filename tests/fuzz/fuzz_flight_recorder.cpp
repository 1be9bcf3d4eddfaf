// Fuzz target: open and follow an arbitrary file as a flight recorder. Any input must end in
// format_error or a clean read, never a crash, a hang or an out-of-bounds access.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "xtel/flight_recorder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // An in-memory file, so fuzzing does not write to disk.
    const int fd = ::memfd_create("xtel-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
        ::close(fd);
        return 0;
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        xtel::flight_recorder::reader r(path);
        std::uint64_t sum = 0;
        for (int round = 0; round < 2; ++round) {
            r.poll([&](const xtel::event& e) { sum += e.value + e.name_view().size(); });
        }
        (void)r.agent_name();
        (void)r.writer_closed();
        if (r.position() > r.published_count()) {
            __builtin_trap();  // the reader may never get ahead of the writer
        }
    } catch (const xtel::flight_recorder::format_error&) {
    }
    ::close(fd);
    return 0;
}
