#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "trace/span_ring_file.hpp"

namespace xtel::trace::span_ring {

namespace {

using xtel::detail::errno_text;
using xtel::detail::fd_guard;
using xtel::detail::pread_all;

/// Opens `path` as the collector opens node files: never through a link, never waiting on a
/// FIFO; then checks the owner of what was opened (the path may have been replaced meanwhile).
int open_trusted(const std::filesystem::path& path, std::span<const uid_t> allowed_owners) {
    fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)};
    if (fd.fd < 0) {
        const int err = errno;
        // ELOOP: the last component is a symbolic link, which O_NOFOLLOW refuses.
        throw format_error(
            err == ELOOP ? file_fault::not_regular : file_fault::unreadable,
            fmt::format("{}: cannot open: {}", path.string(),
                        err == ELOOP ? "a symbolic link (not followed)" : errno_text(err)));
    }
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) {
        throw format_error(file_fault::unreadable,
                           fmt::format("{}: cannot stat: {}", path.string(), errno_text(errno)));
    }
    const uid_t self = ::geteuid();
    if (st.st_uid != self && std::find(allowed_owners.begin(), allowed_owners.end(), st.st_uid) ==
                                 allowed_owners.end()) {
        throw format_error(file_fault::unreadable,
                           fmt::format("{}: owned by uid {}, neither this user (uid {}) nor an "
                                       "allowed one: not trusted",
                                       path.string(), st.st_uid, self));
    }
    return fd.release();
}

}  // namespace

reader::reader(const std::filesystem::path& path,
               std::uint64_t max_file_bytes,
               std::span<const uid_t> allowed_owners)
    : reader(open_trusted(path, allowed_owners), path, max_file_bytes) {}

reader::reader(int file, std::filesystem::path file_path, std::uint64_t max_file_bytes)
    : owned_file_reader(file, std::move(file_path)) {
    const auto name = path().string();
    file_header h{};
    const std::uint64_t size =
        xtel::detail::check_opened(detail::file_kind, fd(), path(), &h, max_file_bytes);
    if (h.header_size != header_size || h.slot_size != sizeof(slot)) {
        throw format_error(
            file_fault::wrong_format,
            fmt::format("{}: unexpected header size {} or slot size {} (expected "
                        "{} and {})",
                        name, h.header_size, h.slot_size, header_size, sizeof(slot)));
    }
    xtel::detail::check_writer_state(path(), h.state);
    if (h.slot_count == 0 || h.slot_count > max_slot_count) {
        throw format_error(
            file_fault::wrong_format,
            fmt::format("{}: slot count {} out of 1 to {}", name, h.slot_count, max_slot_count));
    }
    if (size != detail::slot_offset(h.slot_count)) {
        throw format_error(file_fault::damaged,
                           fmt::format("{}: damaged: {} bytes, but {} slots make {}", name, size,
                                       h.slot_count, detail::slot_offset(h.slot_count)));
    }
    agent_name_.assign(h.agent_name, ::strnlen(h.agent_name, name_size));
    writer_pid_ = h.writer_pid;
    slot_count_ = h.slot_count;
    // The oldest span the ring still holds.
    next_ = h.head >= slot_count_ ? h.head - slot_count_ + 1 : 1;
}

void reader::damaged(std::string_view why) const {
    throw format_error(file_fault::damaged, fmt::format("{}: damaged: {}", path().string(), why));
}

file_header reader::read_header() const {
    file_header h{};
    if (!pread_all(fd(), &h, sizeof h, 0)) {
        damaged("truncated below its header");
    }
    return h;
}

std::uint64_t reader::read_head() const {
    std::uint64_t head = 0;
    if (!pread_all(fd(), &head, sizeof head, offsetof(file_header, head))) {
        damaged("truncated below its header");
    }
    return head;
}

read_result reader::read(std::vector<span_record>& out, std::size_t max_spans) {
    read_result result;
    const std::uint64_t head = read_head();
    // A count no writer reaches (a span a nanosecond for a century is under 2^62), so that
    // the sequence numbers, twice it, never wrap.
    if (head > std::uint64_t{1} << 62) {
        damaged(fmt::format("its head {} is past any count of spans", head));
    }
    if (head + 1 < next_) {
        damaged(fmt::format("its head went back from {} to {}", next_ - 1, head));
    }
    // Older spans than the last slot_count are overwritten for sure: counted without a read.
    if (head >= slot_count_ && next_ < head - slot_count_ + 1) {
        result.lost += head - slot_count_ + 1 - next_;
        next_ = head - slot_count_ + 1;
    }
    for (; next_ <= head && result.copied < max_spans; ++next_) {
        // Seqlock read of one slot: its number, the span, its number again. Both 2n: the span
        // is span n, whole. A greater number: the writer came round again and overwrote it, or
        // is overwriting it, before or during the copy. A smaller one cannot be: the writer
        // raises the head only after the slot is whole.
        const std::uint64_t at = detail::slot_offset((next_ - 1) % slot_count_);
        const std::uint64_t whole = 2 * next_;
        std::uint64_t before = 0;
        std::uint64_t after = 0;
        span_record r;
        if (!pread_all(fd(), &before, sizeof before, at) ||
            !pread_all(fd(), &r, sizeof r, at + offsetof(slot, record)) ||
            !pread_all(fd(), &after, sizeof after, at)) {
            damaged("truncated while being read");
        }
        if (before == whole && after == whole) {
            out.push_back(r);
            ++result.copied;
        } else if (before < whole || after < before) {
            damaged(
                fmt::format("slot {} holds span number {} where the head ({}) says span {} "
                            "was written",
                            (next_ - 1) % slot_count_, before / 2, head, next_));
        } else {
            ++result.lost;
        }
    }
    lost_ += result.lost;
    return result;
}

void reader::skip_to_latest() {
    next_ = read_head() + 1;
}

std::uint64_t reader::written() const {
    return read_head();
}

bool reader::closed() const {
    return read_header().state == static_cast<std::uint32_t>(writer_state::closed);
}

}  // namespace xtel::trace::span_ring
