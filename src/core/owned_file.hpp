#pragma once
// A file in a shared directory with one live writer per name (private to src/): the flight
// recorder and the node file are both owned files. What is the same for both lives here: the
// writer's life cycle (create, write, check, give up once, close) and the checks every reader
// makes before trusting a header. Each format describes itself in one owned_file_kind. The
// rules, which docs/buffer-format.md ("One writer, crashed writers") states for the recorder:
//  - mode 0600, built under a random temporary name and renamed into place without replacing;
//  - never through a symbolic link, never over a non-regular file or another user's file;
//  - the writer holds flock(LOCK_EX) on it for its whole life: a file whose lock is held is a
//    live writer's, and creating over it throws naming that writer's pid;
//  - a file of the current format still marked open whose lock is free was left by a writer
//    that died: it is kept as `<file name>.crashed.<pid>` (the newest 3 per name);
//  - anything else at the path (closed, another format) is replaced.

#include <unistd.h>

#include <fmt/format.h>

#include "xtel/core/clock.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/owned_file_holder.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace xtel::detail {

inline std::string errno_text(int err) {
    return std::system_category().message(err);
}

/// fmt::format for noexcept code: an empty message when there is no memory for it.
template <class... Args>
std::string format_or_empty(fmt::format_string<Args...> format, Args&&... args) noexcept {
    try {
        return fmt::format(format, std::forward<Args>(args)...);
    } catch (...) {
        return {};
    }
}

/// Closes a file descriptor on scope exit unless released.
struct fd_guard {
    int fd = -1;
    fd_guard() = default;
    explicit fd_guard(int f) : fd(f) {}
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    ~fd_guard() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    int release() noexcept {
        const int f = fd;
        fd = -1;
        return f;
    }
};

/// pwrite of all `size` bytes at `offset`, resumed after EINTR and short writes. False with
/// errno set (EIO for a write that made no progress) when it fails.
bool write_all(int fd, const void* data, std::size_t size, std::uint64_t offset) noexcept;

/// pread of exactly `size` bytes at `offset` (never a mapping, so a file cut short under the
/// caller reads short instead of raising SIGBUS). False when the file ends first or a read fails.
bool pread_all(int fd, void* buf, std::size_t size, std::uint64_t offset) noexcept;

/// The field of type `T` at `offset` of a header read into `header` (copied: a header's bytes
/// need not be aligned for `T`).
template <class T>
T header_field(const void* header, std::size_t offset) noexcept {
    T v{};
    std::memcpy(&v, static_cast<const unsigned char*>(header) + offset, sizeof v);
    return v;
}

/// The `state` of an owned file's header: the writer writes open when it creates the file and
/// closed when it ends; a file left open whose lock is free was left by a writer that died.
inline constexpr std::uint32_t state_open = 1;
inline constexpr std::uint32_t state_closed = 2;

/// The largest header an owned file may have.
inline constexpr std::size_t max_header_size = 256;

/// One kind of owned file. Its header begins with the magic (8 bytes), the version and the
/// header size (4 bytes each); the other fields every owned file has are where the offsets say.
struct owned_file_kind {
    /// What the writer calls the file in messages: "flight recorder", "node file".
    std::string_view noun;
    /// What a reader calls a file of the format: "telemetry buffer", "node file".
    std::string_view format_name;
    /// What giving up on the file means, logged after why: "recording stopped: ...".
    std::string_view stopped;
    std::string_view magic;  ///< 8 bytes, NULs included
    std::uint32_t version = 0;
    std::uint32_t header_size = 0;
    std::size_t created_us_at = 0;  ///< offsets in the header of the uint64 created_us,
    std::size_t writer_pid_at = 0;  ///< the uint32 writer_pid
    std::size_t state_at = 0;       ///< and the uint32 state
    /// Further checks a header of this build's layout passes (the magic, version and header
    /// size are checked already); nullptr when there are none.
    bool (*layout_current)(const void* header) noexcept = nullptr;
};

/// The kind of the owned files whose header is a `Header` (its size is the header size; it has
/// the fields created_us, writer_pid and state), with their names and format.
template <class Header>
constexpr owned_file_kind owned_file_kind_of(
    std::string_view noun,
    std::string_view format_name,
    std::string_view stopped,
    std::string_view magic,
    std::uint32_t version,
    bool (*layout_current)(const void*) noexcept = nullptr) {
    static_assert(sizeof(Header) <= max_header_size);
    return {noun,
            format_name,
            stopped,
            magic,
            version,
            sizeof(Header),
            offsetof(Header, created_us),
            offsetof(Header, writer_pid),
            offsetof(Header, state),
            layout_current};
}

/// True when the file begins with the kind's magic. A writer checks it as well as the file's
/// size: a file truncated between the writer's size check and its writes is grown back by
/// those writes (pwrite past the end fills the gap with zeros), so its size looks right again,
/// but its header is gone.
bool magic_intact(const owned_file_kind& kind, int fd) noexcept;

/// Why an owned file could not be made, for a writer that tells the node (the node exporter's
/// unpublished notice, xtel/node/notice.hpp).
enum class create_failure : std::uint8_t {
    name_taken,    ///< a live writer holds the file
    path_blocked,  ///< a link, a non-regular file or another user's file is at the path
    no_space,      ///< ENOSPC or EDQUOT
    other,
};

/// The exporter_error create_owned_file throws, with why in a word.
class owned_file_error : public exporter_error {
  public:
    owned_file_error(create_failure reason, const std::string& what)
        : exporter_error(what), reason_(reason) {}

    create_failure reason() const noexcept { return reason_; }

  private:
    create_failure reason_;
};

/// Throws owned_file_error "<noun> <path>: <why>".
[[noreturn]] void refuse(const owned_file_kind& kind,
                         const std::filesystem::path& path,
                         std::string_view why,
                         create_failure reason = create_failure::other);

/// A new header of `kind` for the writer of `agent_name`, this process, now: the fields every
/// owned file's header has (magic, version, header size, created_us, writer_pid, state open)
/// and the agent's name, cut to its field and NUL-terminated. The caller fills in its format's
/// own fields.
template <class Header>
Header new_owned_header(const owned_file_kind& kind, std::string_view agent_name) noexcept {
    static_assert(sizeof(Header) <= max_header_size);
    Header h{};
    std::memcpy(h.magic, kind.magic.data(), std::min(kind.magic.size(), sizeof h.magic));
    h.version = kind.version;
    h.header_size = kind.header_size;
    h.created_us = clock::now_us();
    h.writer_pid = static_cast<std::uint32_t>(::getpid());
    h.state = state_open;
    std::memcpy(h.agent_name, agent_name.data(),
                std::min(agent_name.size(), sizeof h.agent_name - 1));
    return h;
}

/// `<dir>/<agent_name><suffix>`, the file of `kind` a writer names after its agent. Throws
/// config_error unless `agent_name` is a valid file name (parse::file_name) that leaves room in
/// 255 bytes for the suffix and for ".crashed.<pid>".
std::filesystem::path agent_file_path(const owned_file_kind& kind,
                                      const std::filesystem::path& dir,
                                      std::string_view agent_name,
                                      std::string_view suffix);

/// Creates `path` as a new file of `kind`: clears the way (see above), then builds the file
/// under a temporary name: mode 0600, `size` bytes reserved with posix_fallocate, `header`
/// written at offset 0, flock(LOCK_EX) taken, and renames it into place. Returns its
/// descriptor, which holds the lock until closed. `agent_name` is for the log lines only.
/// Throws exporter_error naming the path and why.
int create_owned_file(const owned_file_kind& kind,
                      const std::filesystem::path& path,
                      std::string_view agent_name,
                      std::uint64_t size,
                      std::span<const std::byte> header);

/// A writer's hold on the file it created, made of owned_file_writer's members (which is public,
/// as the writers built on it are, and cannot hold a type of src/). Writing, checking and giving
/// up are the same for every owned file: the first failure is the last, logged once.
struct owned_writer {
    const owned_file_kind& kind;
    const std::filesystem::path& path;
    int& fd;               ///< holds flock(LOCK_EX) for the writer's life
    std::string& failure;  ///< written once, before `failed` is set
    std::atomic<bool>& failed;

    /// Writes all of `data` at `offset`; gives up when the write fails.
    bool write_at(const void* data, std::size_t size, std::uint64_t offset) const noexcept;
    /// True when the file is still the one this writer made, at `size` bytes at least: pwrite
    /// past a cut would only grow a sparse file no reader can use, and writing to a deleted one
    /// is for nobody. Gives up when it is not.
    bool intact(std::uint64_t size) const noexcept;
    /// Stops writing for good: keeps "<noun> <path> <what>" as the failure, sets `failed` and
    /// logs one error saying what that stops.
    void give_up(std::string_view what) const noexcept;
    /// Marks the file closed (unless the writer gave up on it) and closes it, which releases
    /// the lock. The file stays for readers that come late.
    void close() const noexcept;
};

/// Opens `path` for a reader, with O_NONBLOCK so that a FIFO is refused at once instead of
/// waited on (a link is followed). Throws format_error (unreadable) "<path>: cannot open: <why>".
int open_for_reading(const std::filesystem::path& path);

/// What every reader checks of the file open at `fd` before trusting its header, in this
/// order: a regular file, at most `max_bytes` bytes, at least the header, whose
/// kind.header_size bytes it copies to `header`, with the kind's magic and version. Returns the
/// file's size. Throws format_error naming `path`; the caller checks the rest of its layout.
std::uint64_t check_opened(const owned_file_kind& kind,
                           int fd,
                           const std::filesystem::path& path,
                           void* header,
                           std::uint64_t max_bytes = ~std::uint64_t{0});

/// For a reader: throws format_error (wrong_format) naming `path` unless `state`, read from its
/// header, is one a writer writes (open or closed).
void check_writer_state(const std::filesystem::path& path, std::uint32_t state);

/// For a reader: 0 when no writer holds the file's lock (the shared lock granted is released at
/// once, so that a reader never keeps the next writer waiting), EWOULDBLOCK while one does, or
/// the errno of a flock that failed otherwise.
int probe_writer_lock(int fd) noexcept;

/// True when `path` no longer names the file open at `fd`.
bool replaced(const std::filesystem::path& path, int fd) noexcept;

}  // namespace xtel::detail
