// Fuzz target: open and follow an arbitrary file as a flight recorder, then shrink it under the
// reader. Any input must end in format_error or a clean read, never a crash, a signal, a hang
// or an out-of-bounds access, and every event number the reader passes is delivered or missed
// exactly once.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "xtel/exporters/flight_recorder.hpp"

namespace {

/// Bounded steps, as the programs read, so a huge declared ring costs no more than a few.
constexpr std::uint64_t step = 4096;
constexpr int max_steps = 8;

std::uint64_t poll_some(xtel::flight_recorder::reader& r, std::uint64_t& delivered) {
    std::uint64_t sum = 0;
    for (int i = 0; i < max_steps; ++i) {
        delivered +=
            r.poll([&](const xtel::event& e) { sum += e.value + e.name_view().size(); }, step);
        if (r.backlog() == 0) {
            break;
        }
    }
    return sum;
}

}  // namespace

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
    std::uint64_t delivered = 0;
    try {
        xtel::flight_recorder::reader r(path);
        for (int round = 0; round < 2; ++round) {
            (void)poll_some(r, delivered);
        }
        (void)r.agent_name();
        (void)r.writer_closed();
        if (delivered + r.missed() != r.position()) {
            __builtin_trap();  // an event number was skipped or counted twice
        }
        // A file truncated under the reader must be a format_error, never SIGBUS.
        if (::ftruncate(fd, static_cast<off_t>(size / 2)) == 0) {
            (void)poll_some(r, delivered);
        }
    } catch (const xtel::flight_recorder::format_error&) {
    }
    ::close(fd);
    return 0;
}
