#pragma once
/// Who holds a node file's lock (private to src/): the collector checks that the process
/// holding a live file's flock(2) is the writer its header names, so that a file whose lock
/// another process holds is not served as that writer's. Read from /proc/locks, which lists
/// every lock with its holder's pid as this process's PID namespace sees it (pid 0, or no
/// line at all, for a holder it cannot see), and /proc/<pid>/status (`NSpid:`), which gives
/// the pid that process has in its own, innermost namespace: the one the writer put in the
/// header.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace xtel::node::detail {

/// The exclusive flock(2) holders of the files of one device, from one reading of
/// /proc/locks.
class flock_holders {
  public:
    /// What of /proc/locks is read at most: about 80,000 locks. A host with more has its
    /// locks past that unseen (truncated()).
    static constexpr std::size_t max_read_bytes = 4 << 20;

    flock_holders() = default;

    /// Reads `locks` (/proc/locks) once, keeping the holders of files on device `dev`.
    /// A file that cannot be read leaves the table empty (readable() false).
    static flock_holders read(dev_t dev, const std::filesystem::path& locks = "/proc/locks");

    /// The same from the text of /proc/locks (what read() parses).
    static flock_holders parse(std::string_view text, dev_t dev);

    /// The pid of the process holding an exclusive flock on inode `ino`, as /proc/locks shows
    /// it; std::nullopt when no visible process does (none, or one in a PID namespace this
    /// process cannot see).
    std::optional<pid_t> holder(ino_t ino) const;

    bool readable() const noexcept { return readable_; }
    /// True when /proc/locks was longer than max_read_bytes: the rest was not read.
    bool truncated() const noexcept { return truncated_; }

  private:
    /// Adds the holder one line of /proc/locks names, if it is an exclusive flock held (not
    /// waited for) on device dev_ by a visible process.
    void add_line(std::string_view line);

    dev_t dev_ = 0;
    std::unordered_map<ino_t, pid_t> holders_;
    bool readable_ = false;
    bool truncated_ = false;
};

/// The pid that process `pid` (as this process's /proc names it) has in the innermost PID
/// namespace it belongs to: the last `NSpid:` entry of /proc/<pid>/status, or `pid` itself on
/// a kernel without that line. std::nullopt when the process is gone or its status cannot be
/// read.
std::optional<pid_t> innermost_pid(pid_t pid, const std::filesystem::path& proc = "/proc");

}  // namespace xtel::node::detail
