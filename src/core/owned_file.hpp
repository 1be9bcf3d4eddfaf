#pragma once
// A file in a shared directory with one live writer per name (private to src/): the flight
// recorder and the node file both create theirs through create_owned_file. The rules, which
// docs/buffer-format.md ("One writer, crashed writers") states for the recorder:
//  - mode 0600, built under a random temporary name and renamed into place without replacing;
//  - never through a symbolic link, never over a non-regular file or another user's file;
//  - the writer holds flock(LOCK_EX) on it for its whole life: a file whose lock is held is a
//    live writer's, and creating over it throws naming that writer's pid;
//  - a file of the current format still marked open whose lock is free was left by a writer
//    that died: it is kept as `<file name>.crashed.<pid>` (the newest 3 per name);
//  - anything else at the path (closed, another format) is replaced.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace xtel::detail {

inline std::string errno_text(int err) {
    return std::system_category().message(err);
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

/// True when the file begins with the `size` bytes at `magic`. A writer checks it as well as
/// the file's size: a file truncated between the writer's size check and its writes is grown
/// back by those writes (pwrite past the end fills the gap with zeros), so its size looks
/// right again, but its header is gone.
inline bool magic_intact(int fd, const void* magic, std::size_t size) noexcept {
    char buf[16];
    return size <= sizeof buf && pread_all(fd, buf, size, 0) && std::memcmp(buf, magic, size) == 0;
}

/// What a previous file's header says, for deciding what becomes of it.
struct owned_header {
    bool read = false;     ///< the whole header could be read
    bool current = false;  ///< of the format (magic, version, layout) this build writes
    bool open = false;     ///< its state says open; meaningful when current
    std::uint32_t writer_pid = 0;
    std::uint64_t created_us = 0;
};

/// One kind of owned file.
struct owned_file_kind {
    /// What the file is called in messages: "flight recorder", "node file".
    std::string_view noun;
    /// Reads the header of a file of this kind from `fd` (offset 0, pread only).
    owned_header (*read_header)(int fd) noexcept;
};

/// Throws exporter_error "<noun> <path>: <why>".
[[noreturn]] void refuse(const owned_file_kind& kind,
                         const std::filesystem::path& path,
                         std::string_view why);

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

}  // namespace xtel::detail
