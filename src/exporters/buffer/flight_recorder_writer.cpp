#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "core/log.hpp"
#include "core/owned_file.hpp"
#include "exporters/buffer/recorder_io.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace xtel::flight_recorder {

namespace {

using xtel::detail::write_all;

/// Slots per pwrite: a batch is written from a staging buffer of at most this many slots. The
/// flusher's batches are 4096 events; with 256 slots per pwrite BM_drain/buffer fell from about
/// 85 to 47 M events/s, with 4096 it is at about 60-75 (the buffer is 256 KiB per writer).
constexpr std::size_t staging_limit = 4096;

/// fmt::format for noexcept code: an empty message when there is no memory for it.
template <class... Args>
std::string format_or_empty(fmt::format_string<Args...> format, Args&&... args) noexcept {
    try {
        return fmt::format(format, std::forward<Args>(args)...);
    } catch (...) {
        return {};
    }
}

/// The recorder's header as create_owned_file needs it to judge a previous file.
xtel::detail::owned_header previous_header(int fd) noexcept {
    file_header h{};
    xtel::detail::owned_header o;
    o.read = detail::read_header(fd, h);
    o.current = o.read && detail::is_current_format(h);
    o.open = h.state == static_cast<std::uint32_t>(writer_state::open);
    o.writer_pid = h.writer_pid;
    o.created_us = h.created_us;
    return o;
}

constexpr xtel::detail::owned_file_kind recorder_file{"flight recorder", previous_header};

}  // namespace

writer::writer(const std::filesystem::path& dir, std::string_view agent_name, std::size_t capacity)
    : capacity_(capacity) {
    parse::file_name("agent name", agent_name);
    if (capacity == 0) {
        throw exporter_error("flight recorder capacity must be at least 1 event");
    }
    path_ = dir / std::string(agent_name);

    // Allocated once here: append() allocates nothing.
    staging_slots_ = std::min<std::size_t>(capacity, staging_limit);
    staging_ = std::make_unique<slot[]>(staging_slots_);

    file_header h{};
    std::memcpy(h.magic, magic, sizeof magic);
    h.version = format_version;
    h.header_size = header_size;
    h.slot_size = slot_size;
    h.event_size = sizeof(event);
    h.capacity = capacity;
    h.created_us = clock::now_us();
    h.writer_pid = static_cast<std::uint32_t>(::getpid());
    h.state = static_cast<std::uint32_t>(writer_state::open);
    std::memcpy(h.agent_name, agent_name.data(), std::min(agent_name.size(), agent_name_size - 1));
    fd_ = xtel::detail::create_owned_file(recorder_file, path_, agent_name,
                                          header_size + capacity * slot_size,
                                          std::as_bytes(std::span(&h, 1)));
}

writer::~writer() {
    if (fd_ < 0) {
        return;
    }
    if (!failed()) {
        const auto closed = static_cast<std::uint32_t>(writer_state::closed);
        (void)write_all(fd_, &closed, sizeof closed, offsetof(file_header, state));
    }
    ::close(fd_);  // releases the lock
}

const std::string& writer::failure() const noexcept {
    static const std::string none;
    return failed() ? failure_ : none;
}

void writer::give_up(std::string_view what) noexcept {
    try {
        failure_ = fmt::format("flight recorder {} {}", path_.string(), what);
    } catch (...) {
        // No memory for the message: failed() still says it all.
    }
    failed_.store(true, std::memory_order_release);
    xtel::detail::log(log_level::error,
                      "{}; recording stopped: transfers go on, their events are counted as lost",
                      failure_);
}

/// The file must still be the one this writer made, at its full size: pwrite past a cut would
/// only grow a sparse file no reader can use, and writing to a deleted one is for nobody.
bool writer::file_intact() noexcept {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        give_up(format_or_empty("cannot be checked: {}", std::strerror(errno)));
        return false;
    }
    const auto needed = header_size + capacity_ * slot_size;
    if (st.st_size < static_cast<off_t>(needed)) {
        give_up(format_or_empty("was truncated to {} bytes under this writer (it needs {})",
                                st.st_size, needed));
        return false;
    }
    if (st.st_nlink == 0) {
        give_up("was deleted or replaced by another file under this writer");
        return false;
    }
    if (!xtel::detail::magic_intact(fd_, magic, sizeof magic)) {
        give_up(
            "was truncated under this writer and grown again by its writes: its header is "
            "gone");
        return false;
    }
    return true;
}

bool writer::write_at(const void* data, std::size_t size, std::uint64_t offset) noexcept {
    if (write_all(fd_, data, size, offset)) {
        return true;
    }
    give_up(format_or_empty("cannot be written: {}", std::strerror(errno)));
    return false;
}

bool writer::append(std::span<const event> events) noexcept {
    if (failed_.load(std::memory_order_relaxed)) {
        return false;
    }
    if (events.empty()) {
        return true;
    }
    if (!file_intact()) {
        return false;
    }
    // Claim, fill, publish: a reader that sees claim_seq C after copying a slot knows that
    // slots of events below C - capacity were not being rewritten (docs/buffer-format.md).
    const std::uint64_t end = next_ + events.size();
    if (!write_at(&end, sizeof end, offsetof(file_header, claim_seq))) {
        return false;
    }
    // Of more than a ring's worth, only the last capacity events would survive.
    std::uint64_t n = next_;
    std::uint64_t index = next_index_;
    if (events.size() > capacity_) {
        n = end - capacity_;
        index = n % capacity_;
        events = events.last(capacity_);
    }
    while (!events.empty()) {
        const std::size_t chunk =
            std::min({events.size(), staging_slots_, static_cast<std::size_t>(capacity_ - index)});
        for (std::size_t i = 0; i < chunk; ++i) {
            staging_[i].seq = n + i + 1;
            staging_[i].ev = events[i];
        }
        if (!write_at(staging_.get(), chunk * slot_size, header_size + index * slot_size)) {
            return false;
        }
        events = events.subspan(chunk);
        n += chunk;
        index += chunk;
        if (index == capacity_) {
            index = 0;
        }
    }
    next_ = end;
    next_index_ = index;
    return write_at(&end, sizeof end, offsetof(file_header, write_seq));
}

}  // namespace xtel::flight_recorder
