#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "exporters/buffer/recorder_io.hpp"
#include "xtel/clock.hpp"
#include "xtel/config.hpp"
#include "xtel/flight_recorder.hpp"

namespace xtel::flight_recorder {

namespace {

using detail::errno_text;
using detail::fd_guard;

/// Slots per pwrite: a batch is written from a staging buffer of at most this many slots. The
/// flusher's batches are 4096 events; with 256 slots per pwrite BM_drain/buffer fell from about
/// 85 to 47 M events/s, with 4096 it is at about 60-75 (the buffer is 256 KiB per writer).
constexpr std::size_t staging_limit = 4096;
/// Crashed copies kept per agent name; older ones are deleted when a new one is made.
constexpr std::size_t crashed_copies_kept = 3;

/// fmt::format for noexcept code: an empty message when there is no memory for it.
template <class... Args>
std::string format_or_empty(fmt::format_string<Args...> format, Args&&... args) noexcept {
    try {
        return fmt::format(format, std::forward<Args>(args)...);
    } catch (...) {
        return {};
    }
}

[[noreturn]] void refuse(const std::filesystem::path& path, std::string_view why) {
    throw exporter_error(fmt::format("flight recorder {}: {}", path.string(), why));
}

// ---- what is at the path already -----------------------------------------------------------

/// Refuses what the writer must never replace or follow: a link, a non-file, another user's.
/// True when a regular file of this user is there.
bool own_file_at(const std::filesystem::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) {
            return false;
        }
        refuse(path, errno_text(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        refuse(path, "refusing to replace a symbolic link");
    }
    if (!S_ISREG(st.st_mode)) {
        refuse(path, "exists and is not a regular file");
    }
    if (st.st_uid != ::geteuid()) {
        refuse(path, fmt::format("belongs to user id {}, not to this process (user id {}); "
                                 "refusing to replace it",
                                 st.st_uid, ::geteuid()));
    }
    return true;
}

enum class previous { none, live, crashed, replaceable };

struct previous_file {
    previous what = previous::none;
    std::uint32_t pid = 0;  // of its writer, for live and crashed
};

/// Looks at the file at `path` without changing it. A live writer holds flock(LOCK_EX) on its
/// file for its whole life, so a shared lock that cannot be had means one is running (in this
/// process or another: flock belongs to the open file description). A file of this format still
/// marked open whose lock is free was left by a writer that died.
previous_file inspect(const std::filesystem::path& path) {
    if (!own_file_at(path)) {
        return {};
    }
    const fd_guard fd{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
    if (fd.fd < 0) {
        if (errno == ENOENT) {
            return {};
        }
        if (errno == ELOOP) {
            refuse(path, "refusing to replace a symbolic link");
        }
        // Not readable by its owner: no writer of ours made it (they are 0600).
        return {previous::replaceable};
    }
    file_header h{};
    const bool have_header = detail::read_header(fd.fd, h);
    if (::flock(fd.fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            return {previous::live, have_header ? h.writer_pid : 0};
        }
        return {previous::replaceable};  // a file system without flock: nothing to learn
    }
    if (have_header && detail::is_current_format(h) &&
        h.state == static_cast<std::uint32_t>(writer_state::open)) {
        return {previous::crashed, h.writer_pid};
    }
    return {previous::replaceable};
}

/// `<name>.crashed.<digits>` for `name`.
bool is_crashed_copy_of(const std::string& file, std::string_view agent_name) {
    const std::string prefix = fmt::format("{}.crashed.", agent_name);
    if (file.size() <= prefix.size() || file.compare(0, prefix.size(), prefix) != 0) {
        return false;
    }
    return std::all_of(file.begin() + static_cast<std::ptrdiff_t>(prefix.size()), file.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
}

/// Deletes all but the newest crashed_copies_kept crashed copies of `agent_name` (newest by the
/// creation time in their header, else by modification time). Best effort: a copy it cannot
/// read or delete stays.
void prune_crashed_copies(const std::filesystem::path& dir, std::string_view agent_name) {
    struct copy {
        std::uint64_t created_us;
        std::filesystem::path path;
    };
    std::vector<copy> copies;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        if (!is_crashed_copy_of(entry.path().filename().string(), agent_name)) {
            continue;
        }
        struct stat st {};
        if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != ::geteuid()) {
            continue;
        }
        std::uint64_t created = static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000 +
                                static_cast<std::uint64_t>(st.st_mtim.tv_nsec) / 1000;
        const fd_guard fd{
            ::open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
        file_header h{};
        if (fd.fd >= 0 && detail::read_header(fd.fd, h) && detail::is_current_format(h)) {
            created = h.created_us;
        }
        copies.push_back({created, entry.path()});
    }
    if (copies.size() <= crashed_copies_kept) {
        return;
    }
    std::sort(copies.begin(), copies.end(),
              [](const copy& a, const copy& b) { return a.created_us > b.created_us; });
    for (std::size_t i = crashed_copies_kept; i < copies.size(); ++i) {
        ::unlink(copies[i].path.c_str());
    }
}

/// Moves a dead writer's file aside as `<name>.crashed.<pid>`, so that the new writer does not
/// destroy the record of what happened before the crash.
void keep_crashed(const std::filesystem::path& path,
                  std::string_view agent_name,
                  std::uint32_t pid) {
    const auto kept = path.parent_path() / fmt::format("{}.crashed.{}", agent_name, pid);
    if (::rename(path.c_str(), kept.c_str()) != 0) {
        xtel::detail::log(
            log_level::warning,
            "agent '{}': flight recorder {} was left open by process {}, which is gone; "
            "cannot keep it as {} ({}), so it is replaced",
            agent_name, path.string(), pid, kept.string(), errno_text(errno));
        return;
    }
    xtel::detail::log(
        log_level::warning,
        "agent '{}': flight recorder {} was left open by process {}, which is gone; its "
        "post-mortem record is kept as {}",
        agent_name, path.string(), pid, kept.string());
    prune_crashed_copies(path.parent_path(), agent_name);
}

/// Makes room at `path` for a new file: throws when a live writer holds it, moves a crashed
/// writer's file aside, removes anything else (a closed file, a file not of this format).
void clear_the_way(const std::filesystem::path& path, std::string_view agent_name) {
    const previous_file prev = inspect(path);
    switch (prev.what) {
        case previous::none:
            return;
        case previous::live:
            refuse(path, fmt::format("in use by the live writer process {} (it holds the file's "
                                     "lock; one writer per agent name); left untouched",
                                     prev.pid));
        case previous::crashed:
            keep_crashed(path, agent_name, prev.pid);
            return;
        case previous::replaceable:
            if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
                refuse(path, fmt::format("cannot replace it: {}", errno_text(errno)));
            }
            return;
    }
}

// ---- creating the new file -----------------------------------------------------------------

/// The new file under its temporary name; removed unless placed.
struct temp_file {
    fd_guard fd;
    std::filesystem::path path;
    bool placed = false;

    temp_file() = default;
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;
    ~temp_file() {
        if (!placed && !path.empty()) {
            ::unlink(path.c_str());
        }
    }
};

bool write_all(int fd, const void* data, std::size_t size, std::uint64_t offset) noexcept {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0) {
                errno = EIO;
            }
            return false;
        }
        p += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

/// Builds the whole file under a random temporary name (mkostemp: O_CREAT | O_EXCL, mode 0600,
/// so nobody can plant a file or a link at it beforehand in a shared directory such as
/// /dev/shm), takes the writer's lock on it, and leaves it for place() to move into view.
void create_temp(temp_file& t,
                 const std::filesystem::path& path,
                 std::string_view agent_name,
                 std::size_t capacity) {
    const auto dir = path.parent_path();
    std::string name = (dir / fmt::format(".{}.XXXXXX", agent_name)).string();
    t.fd.fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (t.fd.fd < 0) {
        refuse(path,
               fmt::format("cannot create a file in {}: {}", dir.string(), errno_text(errno)));
    }
    t.path = name;
    auto fail = [&](std::string_view what, int err) {
        refuse(path, fmt::format("{}: {}", what, errno_text(err)));
    };
    if (::fchmod(t.fd.fd, 0600) != 0) {
        fail("cannot set mode 0600", errno);
    }
    const std::size_t size = header_size + capacity * slot_size;
    // Reserve the blocks now: a full file system is found at start-up, not on a later write.
    if (const int err = ::posix_fallocate(t.fd.fd, 0, static_cast<off_t>(size)); err != 0) {
        fail(fmt::format("cannot reserve {} bytes", size), err);
    }
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
    if (!write_all(t.fd.fd, &h, sizeof h, 0)) {
        fail("cannot write the header", errno);
    }
    // Held until the destructor closes the file: this is what tells the next writer of this
    // name that this one is alive.
    if (::flock(t.fd.fd, LOCK_EX | LOCK_NB) != 0) {
        fail("cannot lock", errno);
    }
}

/// Moves the finished file into view, unless something appeared at `path` meanwhile (another
/// writer starting for the same name): then false, and the caller looks again.
bool place(temp_file& t, const std::filesystem::path& path) {
    int rc = ::renameat2(AT_FDCWD, t.path.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
        rc = ::rename(t.path.c_str(), path.c_str());  // a file system without RENAME_NOREPLACE
    }
    if (rc == 0) {
        t.placed = true;
        return true;
    }
    if (errno == EEXIST) {
        return false;
    }
    refuse(path, fmt::format("cannot move into place: {}", errno_text(errno)));
}

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

    // Look before building anything, so that a live writer's file costs nothing but the look.
    temp_file t;
    for (int attempt = 0;; ++attempt) {
        clear_the_way(path_, agent_name);
        if (t.path.empty()) {
            create_temp(t, path_, agent_name, capacity);
        }
        if (place(t, path_)) {
            break;
        }
        if (attempt == 3) {
            refuse(path_, "another file keeps appearing at this path; giving up");
        }
    }
    fd_ = t.fd.release();
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
