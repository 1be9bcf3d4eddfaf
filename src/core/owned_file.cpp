#include "core/owned_file.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"

namespace xtel::detail {

namespace {

/// Crashed copies kept per file name; older ones are deleted when a new one is made.
constexpr std::size_t crashed_copies_kept = 3;

/// What a previous file's header says, for deciding what becomes of it.
struct owned_header {
    bool read = false;     ///< the whole header could be read
    bool current = false;  ///< of the format (magic, version, layout) this build writes
    bool open = false;     ///< its state says open; meaningful when current
    std::uint32_t writer_pid = 0;
    std::uint64_t created_us = 0;
};

/// True when `header` begins with the kind's magic, version and header size.
bool preamble_current(const owned_file_kind& kind, const unsigned char* header) noexcept {
    return std::memcmp(header, kind.magic.data(), kind.magic.size()) == 0 &&
           header_field<std::uint32_t>(header, 8) == kind.version &&
           header_field<std::uint32_t>(header, 12) == kind.header_size;
}

/// Reads the header of a file of `kind` from `fd` (offset 0, pread only).
owned_header read_owned_header(const owned_file_kind& kind, int fd) noexcept {
    unsigned char buf[max_header_size]{};
    owned_header o;
    o.read = kind.header_size <= sizeof buf && pread_all(fd, buf, kind.header_size, 0);
    o.current = o.read && preamble_current(kind, buf) &&
                (kind.layout_current == nullptr || kind.layout_current(buf));
    o.open = header_field<std::uint32_t>(buf, kind.state_at) == state_open;
    o.writer_pid = header_field<std::uint32_t>(buf, kind.writer_pid_at);
    o.created_us = header_field<std::uint64_t>(buf, kind.created_us_at);
    return o;
}

// ---- what is at the path already -----------------------------------------------------------

/// Refuses what the writer must never replace or follow: a link, a non-file, another user's.
/// True when a regular file of this user is there.
bool own_file_at(const owned_file_kind& kind, const std::filesystem::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) {
            return false;
        }
        refuse(kind, path, errno_text(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        refuse(kind, path, "refusing to replace a symbolic link", create_failure::path_blocked);
    }
    if (!S_ISREG(st.st_mode)) {
        refuse(kind, path, "exists and is not a regular file", create_failure::path_blocked);
    }
    if (st.st_uid != ::geteuid()) {
        refuse(kind, path,
               fmt::format("belongs to user id {}, not to this process (user id {}); "
                           "refusing to replace it",
                           st.st_uid, ::geteuid()),
               create_failure::path_blocked);
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
previous_file inspect(const owned_file_kind& kind, const std::filesystem::path& path) {
    if (!own_file_at(kind, path)) {
        return {};
    }
    const fd_guard fd{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
    if (fd.fd < 0) {
        if (errno == ENOENT) {
            return {};
        }
        if (errno == ELOOP) {
            refuse(kind, path, "refusing to replace a symbolic link", create_failure::path_blocked);
        }
        // Not readable by its owner: no writer of ours made it (they are 0600).
        return {previous::replaceable};
    }
    const owned_header h = read_owned_header(kind, fd.fd);
    if (::flock(fd.fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            return {previous::live, h.read ? h.writer_pid : 0};
        }
        return {previous::replaceable};  // a file system without flock: nothing to learn
    }
    if (h.read && h.current && h.open) {
        return {previous::crashed, h.writer_pid};
    }
    return {previous::replaceable};
}

/// `<name>.crashed.<digits>` for `name`.
bool is_crashed_copy_of(const std::string& file, std::string_view name) {
    const std::string prefix = fmt::format("{}.crashed.", name);
    if (file.size() <= prefix.size() || file.compare(0, prefix.size(), prefix) != 0) {
        return false;
    }
    return std::all_of(file.begin() + static_cast<std::ptrdiff_t>(prefix.size()), file.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
}

/// Deletes all but the newest crashed_copies_kept crashed copies of `path` (newest by the
/// creation time in their header, else by modification time). Best effort: a copy it cannot
/// read or delete stays.
void prune_crashed_copies(const owned_file_kind& kind, const std::filesystem::path& path) {
    struct copy {
        std::uint64_t created_us;
        std::filesystem::path path;
    };
    const std::string name = path.filename().string();
    std::vector<copy> copies;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(path.parent_path(), ec)) {
        if (!is_crashed_copy_of(entry.path().filename().string(), name)) {
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
        if (fd.fd >= 0) {
            if (const owned_header h = read_owned_header(kind, fd.fd); h.read && h.current) {
                created = h.created_us;
            }
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
void keep_crashed(const owned_file_kind& kind,
                  const std::filesystem::path& path,
                  std::string_view agent_name,
                  std::uint32_t pid) {
    const auto kept =
        path.parent_path() / fmt::format("{}.crashed.{}", path.filename().string(), pid);
    if (::rename(path.c_str(), kept.c_str()) != 0) {
        log(log_level::warning,
            "agent '{}': {} {} was left open by process {}, which is gone; cannot keep it as {} "
            "({}), so it is replaced",
            agent_name, kind.noun, path.string(), pid, kept.string(), errno_text(errno));
        return;
    }
    log(log_level::warning,
        "agent '{}': {} {} was left open by process {}, which is gone; its post-mortem record is "
        "kept as {}",
        agent_name, kind.noun, path.string(), pid, kept.string());
    prune_crashed_copies(kind, path);
}

/// Makes room at `path` for a new file: throws when a live writer holds it, moves a crashed
/// writer's file aside, removes anything else (a closed file, a file not of this format).
void clear_the_way(const owned_file_kind& kind,
                   const std::filesystem::path& path,
                   std::string_view agent_name) {
    const previous_file prev = inspect(kind, path);
    switch (prev.what) {
        case previous::none:
            return;
        case previous::live:
            refuse(kind, path,
                   fmt::format("in use by the live writer process {} (it holds the file's "
                               "lock; one writer per agent name); left untouched",
                               prev.pid),
                   create_failure::name_taken);
        case previous::crashed:
            keep_crashed(kind, path, agent_name, prev.pid);
            return;
        case previous::replaceable:
            if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
                refuse(kind, path, fmt::format("cannot replace it: {}", errno_text(errno)));
            }
            return;
    }
}

// ---- creating the new file -----------------------------------------------------------------

create_failure failure_of(int err) {
    return err == ENOSPC || err == EDQUOT ? create_failure::no_space : create_failure::other;
}

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

/// Builds the whole file under a random temporary name (mkostemp: O_CREAT | O_EXCL, mode 0600,
/// so nobody can plant a file or a link at it beforehand in a shared directory such as
/// /dev/shm), takes the writer's lock on it, and leaves it for place() to move into view.
void create_temp(temp_file& t,
                 const owned_file_kind& kind,
                 const std::filesystem::path& path,
                 std::uint64_t size,
                 std::span<const std::byte> header) {
    const auto dir = path.parent_path();
    std::string name = (dir / fmt::format(".{}.XXXXXX", path.filename().string())).string();
    t.fd.fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (t.fd.fd < 0) {
        const int err = errno;
        refuse(kind, path,
               fmt::format("cannot create a file in {}: {}", dir.string(), errno_text(err)),
               failure_of(err));
    }
    t.path = name;
    auto fail = [&](std::string_view what, int err) {
        refuse(kind, path, fmt::format("{}: {}", what, errno_text(err)), failure_of(err));
    };
    if (::fchmod(t.fd.fd, 0600) != 0) {
        fail("cannot set mode 0600", errno);
    }
    // Reserve the blocks now: a full file system is found at start-up, not on a later write.
    if (const int err = ::posix_fallocate(t.fd.fd, 0, static_cast<off_t>(size)); err != 0) {
        fail(fmt::format("cannot reserve {} bytes", size), err);
    }
    if (!write_all(t.fd.fd, header.data(), header.size(), 0)) {
        fail("cannot write the header", errno);
    }
    // Held until the writer closes the file: this is what tells the next writer of this name
    // that this one is alive.
    if (::flock(t.fd.fd, LOCK_EX | LOCK_NB) != 0) {
        fail("cannot lock", errno);
    }
}

/// Moves the finished file into view, unless something appeared at `path` meanwhile (another
/// writer starting for the same name): then false, and the caller looks again.
bool place(temp_file& t, const owned_file_kind& kind, const std::filesystem::path& path) {
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
    refuse(kind, path, fmt::format("cannot move into place: {}", errno_text(errno)));
}

}  // namespace

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

bool pread_all(int fd, void* buf, std::size_t size, std::uint64_t offset) noexcept {
    auto* p = static_cast<char*>(buf);
    while (size > 0) {
        const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        p += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

bool magic_intact(const owned_file_kind& kind, int fd) noexcept {
    char buf[16];
    return kind.magic.size() <= sizeof buf && pread_all(fd, buf, kind.magic.size(), 0) &&
           std::memcmp(buf, kind.magic.data(), kind.magic.size()) == 0;
}

void refuse(const owned_file_kind& kind,
            const std::filesystem::path& path,
            std::string_view why,
            create_failure reason) {
    throw owned_file_error(reason, fmt::format("{} {}: {}", kind.noun, path.string(), why));
}

std::filesystem::path agent_file_path(const owned_file_kind& kind,
                                      const std::filesystem::path& dir,
                                      std::string_view agent_name,
                                      std::string_view suffix) {
    parse::file_name("agent name", agent_name);
    // Room for the suffix and for ".crashed.<pid>" in a 255-byte file name.
    const std::size_t max_name = 255 - suffix.size() - 18;
    if (agent_name.size() > max_name) {
        throw config_error(
            fmt::format("agent name '{}' is invalid for a {}: {} bytes, expected "
                        "at most {} (it names the file <name>{})",
                        agent_name, kind.noun, agent_name.size(), max_name, suffix));
    }
    return dir / (std::string(agent_name) + std::string(suffix));
}

int create_owned_file(const owned_file_kind& kind,
                      const std::filesystem::path& path,
                      std::string_view agent_name,
                      std::uint64_t size,
                      std::span<const std::byte> header) {
    // Look before building anything, so that a live writer's file costs nothing but the look.
    temp_file t;
    for (int attempt = 0;; ++attempt) {
        clear_the_way(kind, path, agent_name);
        if (t.path.empty()) {
            create_temp(t, kind, path, size, header);
        }
        if (place(t, kind, path)) {
            break;
        }
        if (attempt == 3) {
            refuse(kind, path, "another file keeps appearing at this path; giving up");
        }
    }
    return t.fd.release();
}

// ---- the writer's life --------------------------------------------------------------------

bool owned_writer::write_at(const void* data,
                            std::size_t size,
                            std::uint64_t offset) const noexcept {
    if (write_all(fd, data, size, offset)) {
        return true;
    }
    give_up(format_or_empty("cannot be written: {}", std::strerror(errno)));
    return false;
}

bool owned_writer::intact(std::uint64_t size) const noexcept {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        give_up(format_or_empty("cannot be checked: {}", std::strerror(errno)));
        return false;
    }
    if (st.st_size < static_cast<off_t>(size)) {
        give_up(format_or_empty("was truncated to {} bytes under this writer (it needs {})",
                                st.st_size, size));
        return false;
    }
    if (st.st_nlink == 0) {
        give_up("was deleted or replaced by another file under this writer");
        return false;
    }
    if (!magic_intact(kind, fd)) {
        give_up(
            "was truncated under this writer and grown again by its writes: its header is "
            "gone");
        return false;
    }
    return true;
}

void owned_writer::give_up(std::string_view what) const noexcept {
    try {
        failure = fmt::format("{} {} {}", kind.noun, path.string(), what);
    } catch (...) {
        // No memory for the message: failed still says it all.
    }
    failed.store(true, std::memory_order_release);
    log(log_level::error, "{}; {}", failure, kind.stopped);
}

void owned_writer::close() const noexcept {
    if (fd < 0) {
        return;
    }
    if (!failed.load(std::memory_order_acquire)) {
        const std::uint32_t closed = state_closed;
        (void)write_all(fd, &closed, sizeof closed, kind.state_at);
    }
    ::close(fd);  // releases the lock
    fd = -1;
}

owned_file_writer::owned_file_writer(const owned_file_kind& kind,
                                     std::filesystem::path path) noexcept
    : kind_(kind), path_(std::move(path)) {}

owned_file_writer::~owned_file_writer() {
    owned().close();
}

void owned_file_writer::create(std::string_view agent_name,
                               std::uint64_t size,
                               std::span<const std::byte> header) {
    fd_ = create_owned_file(kind_, path_, agent_name, size, header);
}

owned_writer owned_file_writer::owned() noexcept {
    return {kind_, path_, fd_, failure_, failed_};
}

const std::string& owned_file_writer::failure() const noexcept {
    static const std::string none;
    return failed() ? failure_ : none;
}

}  // namespace xtel::detail
