// Fuzz target: open an arbitrary file as a node file and copy its latest payload, then shrink
// it under the reader and copy again. Any input must end in format_error, a busy answer or a
// clean copy, never a crash, a signal, a hang or an out-of-bounds access; a copy must lie
// inside the file.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "xtel/node_file.hpp"

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
        xtel::node_file::reader r(path);
        (void)r.published();
        (void)r.refused();
        (void)r.closed();
        (void)r.writer_alive();
        (void)r.agent_name();
        if (const auto p = r.read_latest(4); p && p->payload.size() > size) {
            __builtin_trap();  // a payload larger than the file came from nowhere
        }
        // A file truncated under the reader must be a format_error, never SIGBUS.
        if (::ftruncate(fd, static_cast<off_t>(size / 2)) == 0) {
            (void)r.read_latest(4);
        }
    } catch (const xtel::node_file::format_error&) {
    }
    ::close(fd);
    return 0;
}
