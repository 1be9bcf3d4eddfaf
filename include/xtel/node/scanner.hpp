#pragma once
/// The agents' directory, listed once for every reader of it and trusted by one set of rules
/// (xtel-exporter and `xtel top`). The directory may be writable by other users (/dev/shm is),
/// so every kind of file served from it (node files `<agent>.metrics`, unpublished notices
/// `<agent>.<pid>.unpublished`, span rings `<agent>.spans`; in directories of their own, NIXL's
/// BUFFER rings and prometheus_mp stores) is listed without following links
/// and opened only when, as listed and again as opened (O_NOFOLLOW, O_NONBLOCK: the name may
/// have been replaced meanwhile), it is a regular file of an allowed owner within its kind's
/// size limit. A reader adds its format's own checks and reports through count(): one list of
/// reasons and one table of counts for the directory (docs/deployment.md, "What is refused").
///
/// One listing feeds every reader: the collector (node files and notices) makes it at each
/// refresh, and xtel-exporter's span export reads the span rings of the latest one.
///
/// Thread-safe: scan() from one thread at a time; latest(), open() and the counts from any.

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xtel::node {

/// Why a file of the directory is not served, whatever its kind, in the order shown.
enum class refusal : std::uint8_t {
    foreign_owner,      ///< owned by a uid that is not allowed
    not_regular,        ///< a link, FIFO, device or directory under a served file's name
    too_large,          ///< larger than its kind may be (never read)
    unreadable,         ///< cannot be opened or read (permissions, I/O)
    not_node_file,      ///< magic, version, header size or state is not a node file's
    damaged,            ///< a file whose header names bytes, or a head, it does not hold
    bad_snapshot,       ///< the payload does not decode
    writer_mismatch,    ///< the process holding its lock is not the writer its header names
    writer_unverified,  ///< its lock is held by a process this one cannot see
    name_mismatch,      ///< its file name, header and payload name different agents
    series_limit,       ///< its series would take the node past max_series
    bad_notice,         ///< an unpublished notice (xtel/node/notice.hpp) that does not parse
    not_span_file,      ///< magic, version or layout is not a span ring's
    /// version, sizes or positions are not those of a NIXL layout xtel reads (docs/nixl.md)
    not_nixl_file,
};
inline constexpr std::size_t refusal_count = 14;

/// The name of `r` as the reason label shows it ("foreign_owner").
std::string_view to_string(refusal r) noexcept;

/// The kinds of file served from the directory.
enum class file_kind : std::uint8_t {
    node_file,  ///< `<agent>.metrics` (docs/node-format.md)
    notice,     ///< `<agent>.<pid>.unpublished` (xtel/node/notice.hpp)
    span_ring,  ///< `<agent>.spans` (docs/trace-format.md)
    /// NIXL's BUFFER exporter's ring `<agent>`, in a directory of its own (docs/nixl.md)
    nixl_ring,
    /// NIXL's prometheus_mp store `nixl.<pid>.<number>.<index>.mmap`, in a directory of its own
    nixl_store,
};
inline constexpr std::size_t file_kind_count = 5;

/// The name of `k` as the kind label shows it ("node_file").
std::string_view to_string(file_kind k) noexcept;

/// The reasons a file of each kind can be refused for, in the order
/// xtel_exporter_files_refused_total{kind, reason} shows them.
inline constexpr std::array node_file_reasons = {
    refusal::foreign_owner, refusal::not_regular,     refusal::too_large,
    refusal::unreadable,    refusal::not_node_file,   refusal::damaged,
    refusal::bad_snapshot,  refusal::writer_mismatch, refusal::writer_unverified,
    refusal::name_mismatch, refusal::series_limit};
inline constexpr std::array notice_reasons = {refusal::foreign_owner, refusal::not_regular,
                                              refusal::too_large,     refusal::unreadable,
                                              refusal::name_mismatch, refusal::bad_notice};
inline constexpr std::array span_ring_reasons = {refusal::foreign_owner, refusal::not_regular,
                                                 refusal::too_large,     refusal::unreadable,
                                                 refusal::not_span_file, refusal::damaged};
inline constexpr std::array nixl_ring_reasons = {refusal::foreign_owner, refusal::not_regular,
                                                 refusal::too_large,     refusal::unreadable,
                                                 refusal::not_nixl_file, refusal::damaged};
inline constexpr std::array nixl_store_reasons = {
    refusal::foreign_owner,   refusal::not_regular,      refusal::too_large,
    refusal::unreadable,      refusal::not_nixl_file,    refusal::damaged,
    refusal::writer_mismatch, refusal::writer_unverified};
/// The reasons of kind `k`, as above.
std::span<const refusal> reasons_of(file_kind k) noexcept;

/// A file as listed (fstatat without following links): a file refused once is tried again
/// only when this changes.
struct file_identity {
    std::uint64_t dev = 0;
    std::uint64_t ino = 0;
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uint32_t mode = 0;
    std::uint32_t uid = 0;

    friend bool operator==(const file_identity&, const file_identity&) = default;
    /// The same file, however it was written to since: a file replaced under its name is not.
    bool same_file(const file_identity& o) const noexcept {
        return dev == o.dev && ino == o.ino && mode == o.mode && uid == o.uid;
    }
};

/// One listing of the directory: its files of each kind by name, and the directory as it was
/// listed, open, so that a file is opened where it was listed.
class listing {
  public:
    listing(const listing&) = delete;
    listing& operator=(const listing&) = delete;
    ~listing();

    const std::map<std::string, file_identity>& of(file_kind k) const noexcept {
        return files_[static_cast<std::size_t>(k)];
    }
    /// Counts the scanner's listings from 1: a reader tells a listing it has not seen by it.
    std::uint64_t number() const noexcept { return number_; }
    int dir_fd() const noexcept { return dir_fd_; }

  private:
    friend class scanner;
    listing(int dir_fd, std::uint64_t number) : dir_fd_(dir_fd), number_(number) {}

    int dir_fd_;
    std::uint64_t number_;
    std::array<std::map<std::string, file_identity>, file_kind_count> files_;
};

/// What scanner::open() found: a descriptor, a refusal, or neither (the file went since it
/// was listed: an agent going away, nothing to report).
class opened {
  public:
    opened() = default;
    opened(opened&& o) noexcept;
    opened& operator=(opened&&) = delete;
    ~opened();

    /// The descriptor open for reading, or -1; the caller's once released.
    int fd() const noexcept { return fd_; }
    int release() noexcept;

    /// Set when the file is refused; why() says what was found.
    std::optional<refusal> refused;
    std::string why;
    /// The refusal is this process's trouble (out of descriptors or memory), not the file's:
    /// it is to be tried again at the next listing.
    bool retry = false;

  private:
    friend class scanner;
    int fd_ = -1;
};

class scanner {
  public:
    struct settings {
        std::filesystem::path dir;
        /// What its log lines start with ("xtel-exporter").
        std::string program;
        /// The owners whose files are served besides the uid this process runs as (its
        /// effective uid when it opens them: after --user).
        std::vector<uid_t> allowed_uids;
        /// A node file larger than this is refused unread (--max-file-bytes).
        std::uint64_t max_file_bytes = 0;
        /// Whether span rings are listed (a reader of them is on: xtel-exporter's traces).
        bool span_rings = false;
        /// The directory is NIXL's BUFFER directory (NIXL_TELEMETRY_DIR): every name in it that
        /// is not hidden is a NIXL ring, and nothing else is listed. Rings are opened for
        /// writing too: their one reader advances their read position.
        bool nixl_rings = false;
        /// A NIXL ring larger than this is refused unread.
        std::uint64_t max_nixl_ring_bytes = 0;
        /// The directory is NIXL's prometheus_mp directory (NIXL_TELEMETRY_MULTIPROC_DIR): its
        /// `nixl.*.mmap` files are NIXL stores, opened read-only, and nothing else is listed (not
        /// NIXL's own `nixl-owner.*.lock`).
        bool nixl_stores = false;
        /// A NIXL store larger than this is refused unread.
        std::uint64_t max_nixl_store_bytes = 0;
    };

    explicit scanner(settings s);

    scanner(const scanner&) = delete;
    scanner& operator=(const scanner&) = delete;

    /// The kind a file of this name is, when it is one this scanner lists: not hidden (files
    /// being made have hidden names), not a crashed writer's `<agent>.metrics.crashed.<pid>`.
    std::optional<file_kind> kind_of(std::string_view name) const noexcept;

    /// Lists the directory and returns the listing, which latest() gives from now on. Throws
    /// nothing: a directory that cannot be read is logged (once until it can be read again)
    /// and gives null, the listing before it staying the latest.
    std::shared_ptr<const listing> scan() noexcept;
    /// The listing scan() made last; null before the first.
    std::shared_ptr<const listing> latest() const;

    /// The largest file of kind `k` opened: max_file_bytes for node files, max_notice_bytes
    /// for notices, the largest span ring a writer makes.
    std::uint64_t max_bytes(file_kind k) const noexcept;

    /// Opens `name`, a file of kind `k` in `l`, if the rules trust it as listed and as opened.
    opened open(const listing& l, file_kind k, const std::string& name) const;

    /// Counts a file of kind `k` refused for `r` (each reader counts a file once per change of
    /// its state).
    void count(file_kind k, refusal r) noexcept;
    /// Files of kind `k` refused for `r` so far.
    std::uint64_t refused(file_kind k, refusal r) const noexcept;

    const settings& config() const noexcept { return settings_; }

  private:
    /// Why a file of kind `k` with this mode, owner and size is not to be opened; nullopt
    /// when it may be.
    std::optional<std::pair<refusal, std::string>> untrusted(file_kind k,
                                                             mode_t mode,
                                                             uid_t uid,
                                                             std::uint64_t size) const;
    bool allowed(uid_t uid) const noexcept;

    const settings settings_;
    bool dir_failed_ = false;
    std::uint64_t listings_ = 0;
    mutable std::mutex latest_mutex_;
    std::shared_ptr<const listing> latest_;
    std::array<std::atomic<std::uint64_t>, file_kind_count * refusal_count> refused_{};
};

}  // namespace xtel::node
