// Fuzz target: read an arbitrary file as a store of NIXL's prometheus_mp exporter, the way
// xtel-exporter's --nixl-multiproc-dir reader does. Any input must end in a refusal or a store
// whose every field is one NIXL writes, never a crash, a hang or an out-of-bounds access: a
// store is taken only at schema 1's size, with 1 to 32 increasing bounds, a bucket per bound
// and +Inf in every slot whose counts sum without overflow, and a printable agent name.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "xtel/nixl/multiproc_store.hpp"

namespace ms = xtel::nixl::multiproc_store;

namespace {

void check_taken(const ms::checked& c, std::size_t size) {
    if (c.what != ms::verdict::ok) {
        if (!c.fields.agent_name.empty() || !c.fields.bounds.empty()) {
            __builtin_trap();  // a refusal hands on nothing
        }
        return;
    }
    const ms::store& s = c.fields;
    if (size != ms::file_size || s.pid <= 0 || s.agent_name.empty() || s.bounds.empty() ||
        s.bounds.size() > ms::max_bounds) {
        __builtin_trap();
    }
    for (std::size_t i = 0; i < s.bounds.size(); ++i) {
        if (!std::isfinite(s.bounds[i]) || s.bounds[i] <= 0 ||
            (i > 0 && s.bounds[i] <= s.bounds[i - 1])) {
            __builtin_trap();
        }
    }
    for (const auto& buckets : s.buckets) {
        std::uint64_t total = 0;
        if (buckets.size() != s.bounds.size() + 1) {
            __builtin_trap();
        }
        for (const std::uint64_t n : buckets) {
            if (__builtin_add_overflow(total, n, &total)) {
                __builtin_trap();  // a count a renderer would show wrapped
            }
        }
    }
    for (const char ch : s.agent_name + s.hostname + s.local_rank) {
        if (ch < 0x20 || ch > 0x7e) {
            __builtin_trap();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> bytes(data, size);
    check_taken(ms::check(bytes), size);
    // The same through a descriptor, as the reader reads it: an in-memory file, so fuzzing
    // does not write to disk.
    const int fd = ::memfd_create("xtel-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
        ::close(fd);
        return 0;
    }
    const ms::checked c = ms::read(fd);
    check_taken(c, size);
    // The descriptor's reading is that of the bytes a reader reads: a store's size and one more.
    if (c.what != ms::check(bytes.first(std::min<std::size_t>(size, ms::file_size + 1))).what) {
        __builtin_trap();
    }
    ::close(fd);
    return 0;
}
