#include "xtel/exporters/flight_recorder.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>

#include "exporters/buffer/recorder_io.hpp"

namespace xtel::flight_recorder {

namespace {

/// Slots read per pread: 64 KiB, so that a huge ring is read in steps a caller can interrupt.
constexpr std::uint64_t chunk_slots = 1024;

/// Reads exactly `size` bytes at `offset`; false when the file ends first (it was truncated).
using xtel::detail::pread_all;

}  // namespace

reader::reader(const std::filesystem::path& path)
    : owned_file_reader(xtel::detail::open_for_reading(path), path) {
    const auto name = path.string();
    file_header h{};
    const std::uint64_t size = xtel::detail::check_opened(detail::file_kind, fd(), path, &h);
    if (h.header_size != header_size || h.slot_size != slot_size || h.event_size != sizeof(event)) {
        throw format_error(
            file_fault::wrong_format,
            fmt::format(
                "{}: unexpected layout (header {} bytes, slot {}, event {}; expected {}, {}, {})",
                name, h.header_size, h.slot_size, h.event_size, header_size, slot_size,
                sizeof(event)));
    }
    constexpr std::uint64_t max_capacity =
        (std::numeric_limits<std::uint64_t>::max() - header_size) / slot_size;
    if (h.capacity == 0 || h.capacity > max_capacity) {
        throw format_error(file_fault::wrong_format,
                           fmt::format("{}: absurd capacity {} (expected 1 to {} slots)", name,
                                       h.capacity, max_capacity));
    }
    if (h.capacity > (size - header_size) / slot_size) {
        throw format_error(
            file_fault::wrong_format,
            fmt::format("{}: truncated: {} bytes cannot hold the {} events the header declares",
                        name, size, h.capacity));
    }
    capacity_ = h.capacity;
    chunk_.resize(static_cast<std::size_t>(std::min(capacity_, chunk_slots)));
}

file_header reader::header() const {
    file_header h{};
    if (!pread_all(fd(), &h, sizeof h, 0)) {
        throw format_error(file_fault::damaged,
                           fmt::format("{}: damaged: truncated below its {}-byte header",
                                       path().string(), header_size));
    }
    return h;
}

void reader::refresh() {
    struct stat st {};
    const std::uint64_t expected = header_size + capacity_ * slot_size;
    if (::fstat(fd(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) < expected) {
        throw format_error(
            file_fault::damaged,
            fmt::format(
                "{}: damaged: truncated to {} bytes while being read (the header declares {})",
                path().string(), st.st_size, expected));
    }
    const std::uint64_t w = header().write_seq;
    if (w < next_) {
        throw format_error(file_fault::damaged,
                           fmt::format("{}: damaged: write_seq went back from {} to {} (the file "
                                       "was rewritten or damaged)",
                                       path().string(), next_, w));
    }
    published_ = w;
    if (published_ - next_ > capacity_) {
        missed_ += published_ - capacity_ - next_;
        next_ = published_ - capacity_;
    }
}

std::span<const slot> reader::read_chunk(std::uint64_t max_events) {
    const std::uint64_t index = next_ % capacity_;
    const std::uint64_t n = std::min({published_ - next_, max_events, capacity_ - index,
                                      static_cast<std::uint64_t>(chunk_.size())});
    const auto bytes = static_cast<std::size_t>(n * slot_size);
    if (!pread_all(fd(), chunk_.data(), bytes, header_size + index * slot_size)) {
        throw format_error(file_fault::damaged,
                           fmt::format("{}: damaged: truncated while being read", path().string()));
    }
    // Only now, after the slots were read, may claim_seq be read: event m's slot was safe to
    // read only if no newer event had claimed it by then, that is m + capacity >= claim_seq.
    const std::uint64_t claimed = header().claim_seq;
    for (std::uint64_t i = 0; i < n; ++i) {
        if (next_ + i + capacity_ < claimed) {
            chunk_[i].seq = 0;
        }
    }
    return {chunk_.data(), static_cast<std::size_t>(n)};
}

std::uint64_t reader::published_count() const {
    return header().write_seq;
}

bool reader::writer_closed() const {
    return header().state == static_cast<std::uint32_t>(writer_state::closed);
}

bool reader::writer_gone() const {
    if (writer_closed()) {
        return false;
    }
    // The writer holds LOCK_EX for its whole life; a shared lock granted now means it is gone.
    return lock_free();
}

std::string reader::agent_name() const {
    const file_header h = header();
    return std::string(h.agent_name, ::strnlen(h.agent_name, agent_name_size));
}

std::uint32_t reader::writer_pid() const {
    return header().writer_pid;
}

}  // namespace xtel::flight_recorder
