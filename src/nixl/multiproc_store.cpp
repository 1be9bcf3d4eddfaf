#include "xtel/nixl/multiproc_store.hpp"

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/owned_file.hpp"

namespace xtel::nixl::multiproc_store {

namespace {

// Offsets of the fields (the header's comment).
constexpr std::size_t schema_at = 8, slots_at = 12, pid_at = 16, updated_at = 24, index_at = 32,
                      bucket_count_at = 40, name_at = 48, host_at = 304, rank_at = 432,
                      bounds_at = 496, counters_at = 752, gauges_at = 920, buckets_at = 1088,
                      sums_at = 6632;
constexpr std::size_t name_bytes = 256, host_bytes = 128, rank_bytes = 64;
static_assert(bounds_at == rank_at + rank_bytes && counters_at == bounds_at + 8 * max_bounds &&
                  gauges_at == counters_at + 8 * slot_count &&
                  buckets_at == gauges_at + 8 * slot_count &&
                  sums_at == buckets_at + 8 * slot_count * bucket_slots &&
                  file_size == sums_at + 8 * slot_count,
              "the fields of NIXL's schema 1 follow each other to 6,800 bytes");

template <class T>
T load(std::span<const std::uint8_t> bytes, std::size_t offset) {
    return xtel::detail::header_field<T>(bytes.data(), offset);
}

checked refuse(verdict what, std::string why) {
    return {what, std::move(why), {}};
}

/// The NUL-terminated string of the field of `size` bytes at `offset`, into `out`; what is
/// wrong with it, or empty. Printable ASCII only: a label value that renders as it is.
std::string text_field(std::span<const std::uint8_t> bytes,
                       std::size_t offset,
                       std::size_t size,
                       std::string_view what,
                       std::string& out) {
    const auto field = bytes.subspan(offset, size);
    const auto end = std::find(field.begin(), field.end(), std::uint8_t{0});
    if (end == field.end()) {
        return fmt::format("its {} fills its {} bytes without a terminating NUL", what, size);
    }
    if (const auto bad =
            std::find_if(field.begin(), end, [](std::uint8_t c) { return c < 0x20 || c > 0x7e; });
        bad != end) {
        return fmt::format("its {} holds byte 0x{:02x}; xtel reads printable ASCII", what, *bad);
    }
    out.assign(field.begin(), end);
    return {};
}

/// The bounds and buckets of `s` from `bytes`; what is wrong, or empty.
std::string histograms(std::span<const std::uint8_t> bytes, std::uint64_t count, store& s) {
    for (std::size_t i = 0; i < count; ++i) {
        const double b = load<double>(bytes, bounds_at + 8 * i);
        if (!std::isfinite(b) || b <= 0 || (!s.bounds.empty() && b <= s.bounds.back())) {
            return fmt::format(
                "bucket bound {} is {}; NIXL's are finite, positive and "
                "increasing",
                i, b);
        }
        s.bounds.push_back(b);
    }
    for (std::size_t t = 0; t < slot_count; ++t) {
        const std::size_t at = buckets_at + 8 * bucket_slots * t;
        std::uint64_t total = 0;
        for (std::size_t i = 0; i <= count; ++i) {
            const auto n = load<std::uint64_t>(bytes, at + 8 * i);
            if (__builtin_add_overflow(total, n, &total)) {
                return fmt::format("the buckets of slot {} sum past 2^64", t);
            }
            s.buckets[t].push_back(n);
        }
    }
    return {};
}

}  // namespace

checked check(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < bucket_count_at + 8) {
        return refuse(verdict::damaged, fmt::format("{} bytes, shorter than NIXL's {}-byte "
                                                    "store header",
                                                    bytes.size(), bucket_count_at + 8));
    }
    if (std::memcmp(bytes.data(), magic.data(), magic.size()) != 0) {
        if (std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; })) {
            return {verdict::not_ready, {}, {}};
        }
        return refuse(verdict::not_nixl, fmt::format("no magic {}; not a NIXL store", magic));
    }
    const auto version = load<std::uint32_t>(bytes, schema_at);
    const auto slots = load<std::uint32_t>(bytes, slots_at);
    const auto count = load<std::uint64_t>(bytes, bucket_count_at);
    if (version != schema || slots != slot_count) {
        return refuse(verdict::not_nixl,
                      fmt::format("schema {} with {} slots; xtel reads NIXL's store schema {} "
                                  "with {} slots",
                                  version, slots, schema, slot_count));
    }
    if (count == 0 || count > max_bounds) {
        return refuse(verdict::not_nixl, fmt::format("{} bucket bounds; NIXL's schema {} has 1 "
                                                     "to {}",
                                                     count, schema, max_bounds));
    }
    if (bytes.size() != file_size) {
        return refuse(verdict::damaged, fmt::format("{} bytes, where NIXL's store schema {} "
                                                    "takes {}",
                                                    bytes.size(), schema, file_size));
    }
    checked c{verdict::ok, {}, {}};
    store& s = c.fields;
    s.pid = load<std::int64_t>(bytes, pid_at);
    s.last_update_ns = load<std::uint64_t>(bytes, updated_at);
    s.agent_index = load<std::uint64_t>(bytes, index_at);
    if (s.pid <= 0 || s.pid > INT32_MAX) {
        return refuse(verdict::damaged,
                      fmt::format("pid {}; a process id is 1 to {}", s.pid, INT32_MAX));
    }
    for (std::string fault :
         {text_field(bytes, name_at, name_bytes, "agent name", s.agent_name),
          text_field(bytes, host_at, host_bytes, "hostname", s.hostname),
          text_field(bytes, rank_at, rank_bytes, "local rank", s.local_rank),
          s.agent_name.empty() ? std::string("its agent name is empty") : std::string(),
          histograms(bytes, count, s)}) {
        if (!fault.empty()) {
            return refuse(verdict::damaged, std::move(fault));
        }
    }
    for (std::size_t t = 0; t < slot_count; ++t) {
        s.counters[t] = load<std::uint64_t>(bytes, counters_at + 8 * t);
        s.gauges[t] = load<std::uint64_t>(bytes, gauges_at + 8 * t);
        s.sums[t] = load<std::uint64_t>(bytes, sums_at + 8 * t);
    }
    return c;
}

checked read(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        return refuse(verdict::damaged, fmt::format("cannot stat: {}", std::strerror(errno)));
    }
    // One byte past a store's size at most: check() tells a grown file by it, as by the rest.
    std::array<std::uint8_t, file_size + 1> bytes{};
    const auto size = std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), bytes.size());
    if (!xtel::detail::pread_all(fd, bytes.data(), size, 0)) {
        return refuse(verdict::damaged, "its bytes could not be read: the file shrank");
    }
    return check(std::span<const std::uint8_t>(bytes.data(), size));
}

}  // namespace xtel::nixl::multiproc_store
