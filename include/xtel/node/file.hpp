#pragma once
/// The node file: where an agent publishes its whole metric model at every flush, for readers in
/// other processes (xtel-exporter, one per node). A 256-byte header and payload areas; the writer
/// publishes each payload whole, and a reader copies the latest one without ever seeing it torn
/// and without a lock the writer waits on. The payload is opaque bytes here.
/// docs/node-format.md is the byte-by-byte description.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/error.hpp"
#include "xtel/core/owned_file_holder.hpp"

namespace xtel::node::file {

inline constexpr char magic[8] = {'X', 'T', 'E', 'L', 'N', 'O', 'D', 'E'};
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::size_t header_size = 256;
inline constexpr std::size_t agent_name_size = 64;
/// `<agent name>` + this is the file's name.
inline constexpr std::string_view file_suffix = ".metrics";
/// Capacity of each area when the file is created; areas grow by doubling.
inline constexpr std::uint64_t initial_area_capacity = 64 * 1024;
/// The largest payload the writer publishes (and the largest area a reader accepts).
inline constexpr std::uint64_t max_payload_size = 256 * 1024 * 1024;

enum class writer_state : std::uint32_t { open = 1, closed = 2 };

/// Where one payload lies. A publish writes one of the two descriptors.
struct area {
    std::uint64_t offset;        ///< of the payload, from the start of the file
    std::uint64_t capacity;      ///< bytes reserved at offset
    std::uint64_t length;        ///< bytes of payload, <= capacity
    std::uint64_t generation;    ///< the header's generation that published it
    std::uint64_t published_us;  ///< when it was published, microseconds since the epoch
};
static_assert(sizeof(area) == 40);

/// The header as laid out in the file (little-endian, as written by x86-64 and aarch64 hosts).
struct file_header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t header_size;
    std::uint64_t created_us;     ///< when the file was made, microseconds since the epoch
    std::uint64_t start_time_us;  ///< when the writer's process started (pid reuse tells apart)
    std::uint32_t writer_pid;
    std::uint32_t state;  ///< writer_state
    char agent_name[agent_name_size];
    /// Seqlock: odd while a descriptor is being rewritten; + 2 per publish, so generation / 2
    /// payloads have been published. The latest is the area whose generation equals it.
    std::uint64_t generation;
    std::uint64_t refused;  ///< payloads not published: over max_payload_size, or no room
    area areas[2];
    char reserved[56];  ///< zero
};
static_assert(sizeof(file_header) == header_size);

/// What is wrong with a file a reader refuses; not_node_file is file_fault::wrong_format.
using fault = file_fault;
/// The file is not a node file this build can read, or it was damaged while being read.
using format_error = xtel::format_error;

/// The single writer of one node file, `<dir>/<agent_name>.metrics` (mode 0600). One writer per
/// name, never through a symbolic link or over another user's file; a file left open by a
/// writer that died is kept as `<agent_name>.metrics.crashed.<pid>` (the rules of the flight
/// recorder, docs/buffer-format.md). The writer never maps the file: it writes with pwrite, so a
/// file truncated or replaced under it cannot raise a signal. Use from one thread; failed(),
/// failure() and the counters may be read from any.
class writer : private xtel::detail::owned_file_writer {
  public:
    /// Throws config_error for an agent name that cannot be a file name, and exporter_error: a
    /// live writer holds the file (the message names its pid), a link or another user's file at
    /// the path, a directory it cannot create a file in, no room.
    writer(const std::filesystem::path& dir, std::string_view agent_name);
    // The destructor marks the file closed; the file stays for readers that come late.

    /// Publishes `payload` as the latest, replacing the previous one for readers that start
    /// reading from now on; grows the file when the payload does not fit. Returns false, having
    /// published nothing, when the payload is over max_payload_size or the file cannot grow
    /// (counted in refused(); the previous payload stays; logged the first time), or once the
    /// file is no longer this writer's: truncated, deleted, replaced, or a write failed (logged
    /// once; failed() is true from then on and publish() does nothing).
    bool publish(std::span<const std::byte> payload) noexcept;

    using owned_file_writer::path;
    /// Payloads published so far.
    std::uint64_t published() const noexcept { return published_.load(std::memory_order_relaxed); }
    /// Payloads refused so far (too large, or no room to grow).
    std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
    /// True once publish() has given up on the file; failure() says why (the message it
    /// logged), empty until then.
    using owned_file_writer::failed;
    using owned_file_writer::failure;

  private:
    /// Makes area `index` (the one the next publish writes) hold at least `size` bytes.
    bool make_room(std::size_t index, std::uint64_t size) noexcept;
    void refuse_payload(std::string_view why) noexcept;

    std::string agent_name_;
    std::uint64_t file_size_ = 0;
    std::uint64_t generation_ = 0;
    /// Where each index's next payload goes. After a growth, the region of the index not just
    /// published is new and unpublished: its descriptor in the file still names the old one.
    area regions_[2]{};
    std::size_t next_ = 0;  // the index the next publish writes (not the latest one)
    std::atomic<std::uint64_t> published_{0};
    std::atomic<std::uint64_t> refused_{0};
};

/// One published payload, as a reader copied it.
struct publication {
    /// 1 for the first payload published, 2 for the next...; 0 while none has been (then
    /// `payload` is empty).
    std::uint64_t number = 0;
    std::uint64_t published_us = 0;  ///< 0 while none has been published
    std::vector<std::byte> payload;
};

/// A read-only reader of one node file. Reads with pread only, never a mapping, so a file
/// truncated under it is a format_error instead of SIGBUS. Takes no lock the writer waits on.
/// Whatever the file says, it reads no more than `max_file_bytes` of it: the size and the
/// header are checked before any byte of a payload is.
class reader : private xtel::detail::owned_file_reader {
  public:
    /// No limit but the format's own (areas of at most max_payload_size).
    static constexpr std::uint64_t no_limit = ~std::uint64_t{0};

    /// Opens with O_NONBLOCK, so that a FIFO is refused at once instead of waited on (a link
    /// is followed). Throws format_error: missing, not a regular file, larger than
    /// `max_file_bytes`, truncated, wrong magic, unknown version, ...
    explicit reader(const std::filesystem::path& path, std::uint64_t max_file_bytes = no_limit);
    /// Reads the file open at `fd`, which it owns from now on (closed also when this throws);
    /// `path` names it in messages and in replaced(). For a caller that opened the file itself
    /// (O_NOFOLLOW, relative to a directory) and checked what it opened. Throws as above.
    reader(int fd, std::filesystem::path path, std::uint64_t max_file_bytes = no_limit);

    /// A consistent copy of the latest payload. std::nullopt when the writer published again
    /// during each of `attempts` tries (docs/node-format.md, Reading): try later.
    /// Throws format_error when the file is damaged (truncated, or a stable header that names
    /// bytes outside the file) or has grown past `max_file_bytes` (fault::too_large, nothing
    /// of the payload read).
    std::optional<publication> read_latest(int attempts = 64);

    /// Payloads published so far (the header's generation / 2, read now).
    std::uint64_t published() const;
    /// Payloads the writer refused so far (read now).
    std::uint64_t refused() const;
    /// True once the writer has closed the file (not after a crash).
    bool closed() const;
    /// True while a writer holds the file's lock. A file neither closed() nor writer_alive()
    /// was left by a writer that died.
    bool writer_alive() const noexcept { return writer_holds_lock(); }
    /// True when `path` no longer names the file this reader has open.
    using owned_file_reader::replaced;

    using owned_file_reader::path;
    // Facts the writer set when it made the file; they never change.
    const std::string& agent_name() const noexcept { return agent_name_; }
    std::uint32_t writer_pid() const noexcept { return writer_pid_; }
    std::uint64_t created_us() const noexcept { return created_us_; }
    std::uint64_t start_time_us() const noexcept { return start_time_us_; }

  private:
    file_header read_header() const;
    std::uint64_t read_generation() const;

    std::string agent_name_;
    std::uint64_t max_file_bytes_ = no_limit;
    std::uint32_t writer_pid_ = 0;
    std::uint64_t created_us_ = 0;
    std::uint64_t start_time_us_ = 0;
};

}  // namespace xtel::node::file
