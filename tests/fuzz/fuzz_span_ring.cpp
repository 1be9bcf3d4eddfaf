// Fuzz target: open an arbitrary file as a span ring and read every span it holds, then shrink
// it under the reader and read again. Any input must end in format_error or spans copied, never
// a crash, a signal, a hang or an out-of-bounds access. A read copies no more spans than it was
// allowed nor than the ring has slots, counts what it does not copy as lost rather than
// inventing spans, and a reader with a size limit below the file's refuses it as too large.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "xtel/trace/span_ring.hpp"

namespace sr = xtel::trace::span_ring;

namespace {

/// A reader of the file open at `fd`, through a descriptor of its own.
sr::reader open_reader(int fd, std::uint64_t limit) {
    return sr::reader(::dup(fd), "fuzz.spans", limit);
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
    if (size > 0) {
        try {
            (void)open_reader(fd, size - 1);
            __builtin_trap();  // opened a file over its limit
        } catch (const xtel::format_error& e) {
            if (e.kind() != xtel::file_fault::too_large) {
                __builtin_trap();  // the size is checked before anything of the file is read
            }
        }
    }
    try {
        sr::reader r = open_reader(fd, sr::reader::no_limit);
        (void)r.closed();
        (void)r.writer_alive();
        (void)r.written();
        std::vector<sr::span_record> out;
        std::uint64_t lost = 0;
        for (int round = 0; round < 3; ++round) {
            out.clear();
            const auto got = r.read(out, 5);
            if (got.copied != out.size() || got.copied > 5 || got.copied > r.slot_count()) {
                __builtin_trap();
            }
            for (const auto& s : out) {
                (void)sr::text(s.agent);  // bounded, whether or not it ends in a NUL
                (void)sr::text(s.remote_agent);
                (void)sr::text(s.request_id);
            }
            lost += got.lost;
        }
        if (lost != r.lost()) {
            __builtin_trap();
        }
        // A file truncated under the reader must be a format_error, never SIGBUS.
        if (::ftruncate(fd, static_cast<off_t>(size / 2)) == 0) {
            r.skip_to_latest();
            (void)r.read(out);
        }
    } catch (const xtel::format_error&) {
    }
    ::close(fd);
    return 0;
}
