#include "xtel/nixl/buffer_ring.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace xtel::nixl::buffer_ring {

namespace {

template <class T>
T load(std::span<const std::uint8_t> bytes, std::size_t offset) {
    T v{};
    std::memcpy(&v, bytes.data() + offset, sizeof v);
    return v;
}

checked refuse(verdict what, std::string why) {
    return {what, std::move(why), {}};
}

/// Reads exactly `n` bytes at `offset`; false on a short read or an error.
bool read_at(int fd, std::uint8_t* to, std::size_t n, std::uint64_t offset) {
    while (n > 0) {
        const ssize_t got = ::pread(fd, to, n, static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return false;
        }
        to += got;
        n -= static_cast<std::size_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
    return true;
}

/// What in `h` is not a layout read here, or empty.
std::string layout_fault(const header& h) {
    if (h.version < oldest_version || h.version > newest_version ||
        h.expected_version != h.version) {
        return fmt::format(
            "version {} (expected version {}); xtel reads NIXL's ring versions {} "
            "to {}",
            h.version, h.expected_version, oldest_version, newest_version);
    }
    if (h.capacity < 2 || h.capacity > max_capacity || (h.capacity & (h.capacity - 1)) != 0) {
        return fmt::format("capacity {} events; xtel reads a power of two from 2 to {}", h.capacity,
                           max_capacity);
    }
    if (h.mask != h.capacity - 1) {
        return fmt::format("mask {} for capacity {}; NIXL's is the capacity less one", h.mask,
                           h.capacity);
    }
    return {};
}

}  // namespace

checked check(std::span<const std::uint8_t> bytes, std::uint64_t file_size) {
    if (bytes.size() < header_size || file_size < header_size) {
        return refuse(verdict::damaged,
                      fmt::format("{} bytes, shorter than NIXL's {}-byte ring header",
                                  std::min<std::uint64_t>(bytes.size(), file_size), header_size));
    }
    header h{load<std::uint64_t>(bytes, 0),  load<std::uint64_t>(bytes, 8),
             load<std::int32_t>(bytes, 16),  load<std::int32_t>(bytes, 20),
             load<std::uint64_t>(bytes, 24), load<std::uint64_t>(bytes, 32)};
    if (std::all_of(bytes.begin(), bytes.begin() + header_size,
                    [](std::uint8_t b) { return b == 0; })) {
        return {verdict::not_ready, {}, h};
    }
    if (std::string fault = layout_fault(h); !fault.empty()) {
        return refuse(verdict::not_nixl, std::move(fault));
    }
    const std::uint64_t size = header_size + event_size * h.capacity;
    if (file_size != size) {
        return refuse(verdict::damaged,
                      fmt::format("{} bytes, where its header's {} events take {}", file_size,
                                  h.capacity, size));
    }
    if (h.write_pos >= h.capacity || h.read_pos >= h.capacity) {
        return refuse(verdict::damaged,
                      fmt::format("write position {} and read position {} in a ring of {} slots",
                                  h.write_pos, h.read_pos, h.capacity));
    }
    return {verdict::ok, {}, h};
}

void copy_events(std::span<const std::uint8_t> slots,
                 const header& h,
                 std::uint64_t from,
                 std::uint64_t to,
                 std::vector<abi_v2::event>& out) {
    if (from >= h.capacity || to >= h.capacity || slots.size() < h.capacity * event_size) {
        return;
    }
    for (std::uint64_t i = from; i != to; i = (i + 1) & h.mask) {
        const std::size_t at = static_cast<std::size_t>(i * event_size);
        out.push_back({static_cast<abi_v2::event_type>(load<std::uint32_t>(slots, at)),
                       load<std::uint64_t>(slots, at + 8)});
    }
}

checked reader::drain(std::vector<abi_v2::event>& out) {
    struct stat st {};
    std::uint8_t bytes[header_size];
    if (::fstat(fd_, &st) != 0) {
        return refuse(verdict::damaged, fmt::format("cannot stat: {}", std::strerror(errno)));
    }
    const auto file_size = static_cast<std::uint64_t>(st.st_size);
    const std::size_t got = read_at(fd_, bytes, header_size, 0) ? header_size : 0;
    checked c = check(std::span<const std::uint8_t>(bytes, got), file_size);
    if (c.what != verdict::ok) {
        return c;
    }
    const header& h = c.head;
    if (first_ && (first_->capacity != h.capacity || first_->version != h.version)) {
        return refuse(verdict::damaged,
                      fmt::format("its header changed from version {}, {} events to version {}, "
                                  "{} events while it was read",
                                  first_->version, first_->capacity, h.version, h.capacity));
    }
    first_ = h;
    if (h.write_pos == h.read_pos) {
        return c;
    }
    // The slots NIXL has written and not yet been given back: [read_pos, write_pos).
    slots_.resize(static_cast<std::size_t>(h.capacity * event_size));
    const std::uint64_t begin = h.read_pos;
    const std::uint64_t end = h.write_pos;
    const bool ok =
        begin < end
            ? read_at(fd_, slots_.data() + begin * event_size, (end - begin) * event_size,
                      header_size + begin * event_size)
            : read_at(fd_, slots_.data() + begin * event_size, (h.capacity - begin) * event_size,
                      header_size + begin * event_size) &&
                  read_at(fd_, slots_.data(), end * event_size, header_size);
    if (!ok) {
        return refuse(verdict::damaged, "its events could not be read: the file shrank");
    }
    // The events are taken: their slots are NIXL's again.
    const std::uint64_t read_pos = end;
    if (::pwrite(fd_, &read_pos, sizeof read_pos, 8) != static_cast<ssize_t>(sizeof read_pos)) {
        return refuse(verdict::damaged, fmt::format("its read position could not be written: {}",
                                                    std::strerror(errno)));
    }
    copy_events(slots_, h, begin, end, out);
    return c;
}

}  // namespace xtel::nixl::buffer_ring
