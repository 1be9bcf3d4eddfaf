#pragma once
/// The span ring: where an agent's flusher writes the spans of its transfers, for readers in
/// other processes (xtel-exporter, which exports them as OTLP traces). A 256-byte header and a
/// fixed number of fixed-size slots; the single writer never waits for a reader and overwrites
/// the oldest span when the ring is full; each slot's sequence number lets a reader copy a span
/// without ever returning it torn, and count the spans it lost when it fell behind. The file
/// follows the node file's rules of ownership, locking and crashes (docs/node-format.md).
/// docs/trace-format.md is the byte-by-byte description.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/error.hpp"
#include "xtel/core/owned_file_holder.hpp"
#include "xtel/trace/context.hpp"

namespace xtel::trace::span_ring {

inline constexpr char magic[8] = {'X', 'T', 'E', 'L', 'S', 'P', 'A', 'N'};
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::size_t header_size = 256;
/// `<agent name>` + this is the file's name, beside the agent's `<agent name>.metrics`.
inline constexpr std::string_view file_suffix = ".spans";
/// The bounded strings of a record, NUL-padded: a longer name is cut to one byte less.
inline constexpr std::size_t name_size = 64;
/// 8192 slots (2.5 MiB): eight seconds of spans at the default budget of 1000 a second, so a
/// reader that polls every second or two loses none while the agent stays within its budget.
inline constexpr std::uint32_t default_slot_count = 8192;
/// The most slots a writer makes and a reader accepts (320 MiB of slots).
inline constexpr std::uint32_t max_slot_count = 1u << 20;

enum class writer_state : std::uint32_t { open = 1, closed = 2 };

/// Which side of a transfer a span describes (OpenTelemetry's span kind).
enum class side : std::uint8_t {
    initiator = 1,  ///< the agent that posted the transfer (SPAN_KIND_CLIENT)
    target = 2,     ///< the agent a notification told of the transfer (SPAN_KIND_SERVER)
};

/// One span as laid out in a slot (little-endian). Names are NUL-padded and need not end in a
/// NUL when they fill their field; text() reads them.
struct span_record {
    trace_id trace{};
    span_id span{};
    span_id parent{};            ///< all zero: a root span
    std::uint64_t start_us = 0;  ///< when the transfer was posted, microseconds since the epoch
    std::uint64_t end_us = 0;    ///< when it completed or failed
    std::uint64_t bytes = 0;     ///< bytes the transfer moves
    std::uint32_t descriptors = 0;
    std::uint32_t lanes = 0;       ///< transport lanes (UCX endpoints) the transfer was spread over
    std::int32_t rank = -1;        ///< the agent's global rank; -1: unknown
    std::int32_t local_rank = -1;  ///< its rank within the node; -1: unknown
    std::uint8_t operation = 0;    ///< transfer_op: 0 read, 1 write
    std::uint8_t kind = 0;         ///< side
    std::uint8_t status = 0;       ///< status_code: 0 ok, else the failure's code
    std::uint8_t reason = 0;       ///< span_reason: 1 failed, 2 slow, 3 sampled
    std::uint8_t trace_flags = 0;  ///< the caller's W3C trace-flags
    std::uint8_t origin = 0;       ///< trace::origin of the trace id
    std::uint8_t reserved0[2]{};
    char agent[name_size]{};
    char remote_agent[name_size]{};
    char request_id[name_size]{};  ///< the request id the transfer was tagged with
    std::uint8_t reserved[40]{};
};
static_assert(sizeof(span_record) == 312);

/// A slot: the sequence number, then the span. 2n - 1 while span n (n = 1, 2, ...) is being
/// written into it, 2n once it is whole; 0 before any span was.
struct slot {
    std::uint64_t sequence;
    span_record record;
};
static_assert(sizeof(slot) == 320);

/// The header as laid out in the file.
struct file_header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t header_size;
    std::uint64_t created_us;  ///< when the file was made, microseconds since the epoch
    std::uint64_t reserved0;   ///< zero
    std::uint32_t writer_pid;
    std::uint32_t state;  ///< writer_state
    char agent_name[name_size];
    std::uint32_t slot_size;   ///< sizeof(slot): 320
    std::uint32_t slot_count;  ///< 1 to max_slot_count
    /// Spans written so far; span n lies in slot (n - 1) % slot_count while it is one of the
    /// last slot_count written. Raised after the spans it counts are whole.
    std::uint64_t head;
    char reserved[136];  ///< zero
};
static_assert(sizeof(file_header) == header_size);

/// `field` up to its first NUL, or whole when it has none.
template <std::size_t N>
std::string_view text(const char (&field)[N]) noexcept {
    std::size_t n = 0;
    while (n < N && field[n] != '\0') {
        ++n;
    }
    return {field, n};
}

/// Copies `value` into `field`, cut to N - 1 bytes (never inside a UTF-8 sequence), NUL-padded.
template <std::size_t N>
void set_text(char (&field)[N], std::string_view value) noexcept {
    std::size_t n = value.size() < N ? value.size() : N - 1;
    while (n < value.size() && n > 0 && (static_cast<unsigned char>(value[n]) & 0xC0) == 0x80) {
        --n;
    }
    for (std::size_t i = 0; i < N; ++i) {
        field[i] = i < n ? value[i] : '\0';
    }
}

/// The single writer of one span ring, `<dir>/<agent_name>.spans` (mode 0600): one writer per
/// name, never through a symbolic link or over another user's file; a file left open by a
/// writer that died is kept as `<agent_name>.spans.crashed.<pid>`. Writes with pwrite only,
/// never a mapping, so a file truncated or replaced under it cannot raise a signal. Use from
/// one thread (the flusher); written(), failed() and failure() may be read from any.
class writer : private xtel::detail::owned_file_writer {
  public:
    /// Throws config_error for an agent name that cannot be a file name or a slot count out of
    /// 1 to max_slot_count, and exporter_error: a live writer holds the file (the message names
    /// its pid), a link or another user's file at the path, no room, a directory it cannot
    /// create a file in.
    writer(const std::filesystem::path& dir,
           std::string_view agent_name,
           std::uint32_t slot_count = default_slot_count);
    // The destructor marks the file closed; the file stays for readers that come late.

    /// Writes `spans` after the ones written before, overwriting the oldest when the ring is
    /// full; never waits for a reader. Returns false once the file is no longer this writer's
    /// (truncated, deleted, replaced) or a write failed: logged once, failed() is true from then
    /// on and write() does nothing.
    bool write(std::span<const span_record> spans) noexcept;

    using owned_file_writer::path;
    std::uint32_t slot_count() const noexcept { return slot_count_; }
    /// Spans written so far.
    std::uint64_t written() const noexcept { return written_.load(std::memory_order_relaxed); }
    /// True once write() has given up on the file; failure() says why (the message it
    /// logged), empty until then.
    using owned_file_writer::failed;
    using owned_file_writer::failure;

  private:
    std::uint32_t slot_count_ = 0;
    std::uint64_t file_size_ = 0;
    std::uint64_t head_ = 0;
    std::atomic<std::uint64_t> written_{0};
};

/// What one read() brought.
struct read_result {
    std::size_t copied = 0;  ///< spans appended to the caller's vector
    /// Spans written since the previous read that were overwritten before this reader could
    /// copy them (the reader fell behind the writer by more than the ring holds).
    std::uint64_t lost = 0;
};

/// A read-only reader of one span ring. Reads with pread only, never a mapping, so a file
/// truncated under it is a format_error instead of SIGBUS. Takes no lock the writer waits on.
/// Starts at the oldest span the ring still holds (skip_to_latest(): at the next one written).
class reader : private xtel::detail::owned_file_reader {
  public:
    static constexpr std::uint64_t no_limit = ~std::uint64_t{0};

    /// Opens `path` as node files are trusted: O_NOFOLLOW (a link is refused), O_NONBLOCK (a
    /// FIFO is refused at once), a regular file, owned by this process's effective uid or one
    /// of `allowed_owners`, at most `max_file_bytes`. Throws format_error naming the path and
    /// what is wrong: missing, a link or not a regular file, another owner (unreadable), too
    /// large, wrong magic, version or layout.
    explicit reader(const std::filesystem::path& path,
                    std::uint64_t max_file_bytes = no_limit,
                    std::span<const uid_t> allowed_owners = {});
    /// Reads the file open at `fd`, which it owns from now on (closed also when this throws),
    /// for a caller that opened and checked it itself (the collector). Throws as above, but for
    /// the owner, which is the caller's to check.
    reader(int fd, std::filesystem::path path, std::uint64_t max_file_bytes = no_limit);

    /// Appends to `out` the spans written since the last read, oldest first, at most
    /// `max_spans` of them (the rest wait for the next read). A span overwritten before it was
    /// copied, or while it was, is counted in the result's `lost`, never returned torn.
    /// Throws format_error when the file is damaged: truncated, or a head or slot that cannot
    /// be (a head that went back, a slot older than the head says).
    read_result read(std::vector<span_record>& out, std::size_t max_spans = 4096);

    /// From now on, read() starts with the next span written.
    void skip_to_latest();

    /// Spans lost by this reader so far (the sum of read()'s `lost`).
    std::uint64_t lost() const noexcept { return lost_; }
    /// Spans the writer has written so far (read now).
    std::uint64_t written() const;
    /// True once the writer has closed the file (not after a crash).
    bool closed() const;
    /// True while a writer holds the file's lock.
    bool writer_alive() const noexcept { return writer_holds_lock(); }
    /// True when `path` no longer names the file this reader has open.
    using owned_file_reader::replaced;

    using owned_file_reader::path;
    const std::string& agent_name() const noexcept { return agent_name_; }
    std::uint32_t writer_pid() const noexcept { return writer_pid_; }
    std::uint32_t slot_count() const noexcept { return slot_count_; }

  private:
    file_header read_header() const;
    std::uint64_t read_head() const;
    [[noreturn]] void damaged(std::string_view why) const;

    std::string agent_name_;
    std::uint32_t writer_pid_ = 0;
    std::uint32_t slot_count_ = 0;
    std::uint64_t next_ = 1;  // the number of the next span to copy
    std::uint64_t lost_ = 0;
};

}  // namespace xtel::trace::span_ring
