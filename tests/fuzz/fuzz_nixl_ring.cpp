// Fuzz target: open an arbitrary file as NIXL's BUFFER ring and drain it three times, the way
// xtel-exporter's --nixl-buffer-dir reader does. Any input must end in a refusal or events
// taken, never a crash, a hang or an out-of-bounds access. A ring is taken only when its file is
// the size its header names; a drain takes fewer events than the ring has slots, writes the
// read position it reached into the file, and a second drain with nothing written takes none.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "xtel/nixl/buffer_ring.hpp"

namespace br = xtel::nixl::buffer_ring;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The header alone, checked against sizes the file might claim to have.
    const std::span<const std::uint8_t> bytes(data, size);
    for (const std::uint64_t claimed : {std::uint64_t{size}, std::uint64_t{0}, ~std::uint64_t{0}}) {
        const br::checked c = br::check(bytes, claimed);
        if (c.what == br::verdict::ok &&
            (claimed != br::header_size + br::event_size * c.head.capacity ||
             c.head.capacity > br::max_capacity)) {
            __builtin_trap();  // took a ring whose file is not the size it names
        }
    }
    // An in-memory file, so fuzzing does not write to disk.
    const int fd = ::memfd_create("xtel-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
        ::close(fd);
        return 0;
    }
    br::reader r(fd);
    std::vector<xtel::nixl::abi_v2::event> out;
    for (int round = 0; round < 3; ++round) {
        out.clear();
        const br::checked c = r.drain(out);
        if (c.what != br::verdict::ok) {
            if (!out.empty()) {
                __builtin_trap();  // a refusal hands on nothing
            }
            break;
        }
        if (out.size() >= c.head.capacity) {
            __builtin_trap();  // NIXL leaves one slot free: a full ring holds capacity - 1
        }
        std::uint64_t read_pos = 0;
        if (::pread(fd, &read_pos, sizeof read_pos, 8) != sizeof read_pos ||
            read_pos != c.head.write_pos) {
            __builtin_trap();  // the slots taken are given back
        }
        if (round > 0 && !out.empty()) {
            __builtin_trap();  // nothing was written since the drain before
        }
    }
    ::close(fd);
    return 0;
}
