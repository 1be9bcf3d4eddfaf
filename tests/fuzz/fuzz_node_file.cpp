// Fuzz target: open an arbitrary file as a node file and copy its latest payload, then shrink
// it under the reader and copy again. Any input must end in format_error, a busy answer or a
// clean copy, never a crash, a signal, a hang or an out-of-bounds access; a copy must lie
// inside the file. A reader with a size limit below the file's refuses it as too large, and
// the series count the collector takes of a payload before decoding it agrees with the
// decoded snapshot whenever the payload decodes.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "node/series_count.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace {

/// The time series of `s` as Prometheus counts them (what count_time_series counts).
std::uint64_t time_series(const xtel::metrics::snapshot& s) {
    std::uint64_t n = 0;
    for (const auto& f : s.families) {
        std::uint64_t each = 1;
        if (f.spec.type == xtel::metrics::metric_type::histogram) {
            each = f.spec.bounds.size() + 3;
        } else if (f.spec.type == xtel::metrics::metric_type::summary) {
            each = 2;
        }
        n += each * f.series.size();
    }
    return n;
}

/// The count of `payload` must be what decoding it finds, and stop early past a cap.
void check_series_count(const std::vector<std::byte>& payload) {
    const auto counted = xtel::node::detail::count_time_series(payload, ~std::uint64_t{0});
    try {
        const auto decoded = xtel::metrics::decode_snapshot(payload);
        if (!counted || *counted != time_series(decoded)) {
            __builtin_trap();  // the collector would cap by another count than it serves
        }
    } catch (const xtel::metrics::snapshot_decode_error&) {
    }
    if (counted && *counted > 0) {
        const auto stopped = xtel::node::detail::count_time_series(payload, *counted - 1);
        if (!stopped || *stopped <= *counted - 1) {
            __builtin_trap();
        }
    }
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
    if (size > 0) {
        try {
            xtel::node::file::reader limited(path, size - 1);
            __builtin_trap();  // opened a file over its limit
        } catch (const xtel::node::file::format_error& e) {
            if (e.kind() != xtel::node::file::fault::too_large) {
                __builtin_trap();  // the size is checked before anything of the file is read
            }
        }
    }
    try {
        xtel::node::file::reader r(path);
        (void)r.published();
        (void)r.refused();
        (void)r.closed();
        (void)r.writer_alive();
        (void)r.agent_name();
        if (const auto p = r.read_latest(4); p) {
            if (p->payload.size() > size) {
                __builtin_trap();  // a payload larger than the file came from nowhere
            }
            check_series_count(p->payload);
        }
        // A file truncated under the reader must be a format_error, never SIGBUS.
        if (::ftruncate(fd, static_cast<off_t>(size / 2)) == 0) {
            (void)r.read_latest(4);
        }
    } catch (const xtel::node::file::format_error&) {
    }
    ::close(fd);
    return 0;
}
