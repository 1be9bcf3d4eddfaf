#include "xtel/http/gzip.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <new>
#include <stdexcept>
#include <string>

namespace xtel::http {

namespace {

/// Ends the stream on every path out of gzip().
struct deflate_stream {
    z_stream z{};
    ~deflate_stream() { ::deflateEnd(&z); }
};

[[noreturn]] void fail(int rc, const z_stream& z) {
    if (rc == Z_MEM_ERROR) {
        throw std::bad_alloc();
    }
    throw std::runtime_error(std::string("gzip: zlib failed: ") +
                             (z.msg != nullptr ? z.msg : "error " + std::to_string(rc)));
}

}  // namespace

std::string gzip(std::string_view in, int level) {
    deflate_stream s;
    // windowBits 15 + 16: a gzip header and trailer around the deflate data, not zlib's.
    constexpr int gzip_window_bits = 15 + 16;
    constexpr int default_mem_level = 8;
    if (const int rc = ::deflateInit2(&s.z, level, Z_DEFLATED, gzip_window_bits, default_mem_level,
                                      Z_DEFAULT_STRATEGY);
        rc != Z_OK) {
        fail(rc, s.z);
    }
    // deflateBound: room for everything at once, so one pass with Z_FINISH ends the stream
    // (in several calls only where the input is over 4 GiB, zlib's counters being 32-bit).
    std::string out(::deflateBound(&s.z, in.size()), '\0');
    s.z.next_out = reinterpret_cast<Bytef*>(out.data());
    std::size_t left = in.size();
    s.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    while (true) {
        const auto chunk = static_cast<uInt>(std::min<std::size_t>(left, UINT_MAX));
        s.z.avail_in = chunk;
        const std::size_t room = out.size() - s.z.total_out;
        s.z.avail_out = static_cast<uInt>(std::min<std::size_t>(room, UINT_MAX));
        left -= chunk;
        const int rc = ::deflate(&s.z, left == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            break;
        }
        if (rc != Z_OK) {
            fail(rc, s.z);
        }
        left += s.z.avail_in;  // what this call did not take
    }
    out.resize(s.z.total_out);
    return out;
}

}  // namespace xtel::http
