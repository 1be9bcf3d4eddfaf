#pragma once
/// The flight recorder file: a header and a ring of events that any number of read-only
/// readers can follow while one writer appends. docs/buffer-format.md is the byte-by-byte
/// description; this header and examples/python/telemetry_reader.py both follow it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/error.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/owned_file_holder.hpp"

namespace xtel::flight_recorder {

inline constexpr char magic[8] = {'X', 'T', 'E', 'L', 'T', 'L', 'M', '\0'};
inline constexpr std::uint32_t format_version = 2;
inline constexpr std::size_t header_size = 128;
inline constexpr std::size_t slot_size = 64;
inline constexpr std::size_t agent_name_size = 64;
/// Set in a slot's sequence while the writer fills it.
inline constexpr std::uint64_t busy_bit = std::uint64_t{1} << 63;

enum class writer_state : std::uint32_t { open = 1, closed = 2 };

/// The header as laid out in the file (little-endian, as written by x86-64 and aarch64 hosts).
struct file_header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t header_size;
    std::uint32_t slot_size;
    std::uint32_t event_size;
    std::uint64_t capacity;   ///< slots
    std::uint64_t write_seq;  ///< events published so far; written with release order
    std::uint64_t created_us;
    std::uint32_t writer_pid;
    std::uint32_t state;  ///< writer_state
    char agent_name[agent_name_size];
    /// Events the writer has started to write so far (>= write_seq). The slot of event n may be
    /// changing while n + capacity < claim_seq (docs/buffer-format.md).
    std::uint64_t claim_seq;
};
static_assert(sizeof(file_header) == header_size);

struct slot {
    std::uint64_t seq;  ///< n + 1 once event n is published here; busy_bit while being written
    event ev;
};
static_assert(sizeof(slot) == slot_size);

/// The file is not a flight recorder this build can read, or it was damaged while being read.
using format_error = xtel::format_error;

/// The single writer of one file. Creates it at `<dir>/<agent_name>` (mode 0600), replacing a
/// previous file of the same agent, but never through a symbolic link or a file of another user,
/// and never a file a live writer holds (one writer per name, kept with flock). A file left open
/// by a writer that died is kept as `<agent_name>.crashed.<pid>`. The writer never maps the
/// file: it writes with pwrite, so a file truncated or replaced under it cannot raise a signal.
class writer : private xtel::detail::owned_file_writer {
  public:
    /// Throws exporter_error: a live writer holds the file (the message names its pid), a link
    /// or another user's file at the path, a directory it cannot create a file in, no room.
    writer(const std::filesystem::path& dir, std::string_view agent_name, std::size_t capacity);
    /// Commits what was staged, then marks the file closed; the file stays for post-mortem
    /// reading.
    ~writer();

    /// Appends events, overwriting the oldest; publishes them with one write_seq update:
    /// stage(events), then commit().
    /// Returns false, having written none of them, once the file is no longer this writer's to
    /// fill: truncated, shrunk, deleted, replaced, or a write failed. The first time, it logs
    /// one error naming the file and what happened; failed() is true from then on.
    bool append(std::span<const event> events) noexcept;

    /// Takes events to be written by the next commit(), in memory: of events that a later
    /// stage before that commit would overwrite in the ring, none is written. A recorder of
    /// more than 4,096 slots is not mirrored in memory: stage() writes and publishes at once,
    /// as append() does. False once failed(); nothing written is lost then either way.
    bool stage(std::span<const event> events) noexcept;
    /// Writes and publishes what was staged since the last commit: at most two pwrites of
    /// slots and the header's two counters. False, with the staged events not written, once
    /// the file is no longer this writer's to fill (as append()).
    bool commit() noexcept;
    /// Events staged and not yet committed.
    std::uint64_t staged() const noexcept { return staged_; }

    using owned_file_writer::path;
    std::uint64_t written() const noexcept { return next_; }
    /// True once append() has given up on the file; failure() says why (the message it
    /// logged), empty until then. Both from any thread.
    using owned_file_writer::failed;
    using owned_file_writer::failure;

  private:
    /// stage() for a recorder larger than its staging buffer: writes and publishes now.
    bool write_through(std::span<const event> events) noexcept;
    /// Every write's order (docs/buffer-format.md): the file checked, claim_seq = `end`, the
    /// slots (`write_slots(file)`, false on a failed write), then write_seq = `end`.
    template <class WriteSlots>
    bool publish(std::uint64_t end, WriteSlots&& write_slots) noexcept;

    std::unique_ptr<slot[]> staging_;
    std::size_t staging_slots_ = 0;
    std::uint64_t capacity_ = 0;
    std::uint64_t next_ = 0;        // next sequence number (0-based)
    std::uint64_t next_index_ = 0;  // (next_ + staged_) % capacity_, kept without a division
    std::uint64_t staged_ = 0;      // events staged since the last commit (mirrored recorders)
};

/// A read-only follower of one file. Reads with pread only, never a mapping, so a file
/// truncated under it is reported as a format_error instead of raising SIGBUS. Never blocks the
/// writer and never reports a torn event: an event whose slot the writer claimed for a newer
/// one before the read finished is counted as missed instead (docs/buffer-format.md, Reading).
class reader : private xtel::detail::owned_file_reader {
  public:
    /// Opens with O_NONBLOCK, so that a FIFO is refused at once instead of waited on.
    /// Throws format_error: missing, not a regular file, truncated, wrong magic, unknown
    /// version, a capacity that overflows or does not fit the file, ...
    explicit reader(const std::filesystem::path& path);

    /// Delivers up to `max_events` of the events published since the last call (and not yet
    /// delivered), oldest first, to f(const event&), and counts those it skipped as missed.
    /// Returns how many it delivered; backlog() says whether more are waiting. Throws
    /// format_error when the file is damaged under it: truncated, or write_seq gone backwards.
    template <class F>
    std::size_t poll(F&& f, std::uint64_t max_events = UINT64_MAX) {
        std::size_t delivered = 0;
        refresh();
        while (next_ < published_ && max_events > 0) {
            const std::span<const slot> chunk = read_chunk(max_events);
            for (const slot& s : chunk) {
                if (s.seq == next_ + 1) {
                    f(static_cast<const event&>(s.ev));
                    ++delivered;
                } else {
                    ++missed_;  // overwritten, being overwritten, or never written
                }
                ++next_;
            }
            max_events -= chunk.size();
        }
        return delivered;
    }

    /// Events skipped because the writer overwrote them before this reader got to them.
    std::uint64_t missed() const noexcept { return missed_; }
    /// Sequence number of the next event this reader will deliver.
    std::uint64_t position() const noexcept { return next_; }
    std::uint64_t capacity() const noexcept { return capacity_; }
    /// Events published but not yet read, as of the last poll().
    std::uint64_t backlog() const noexcept { return published_ - next_; }
    /// Events published so far (the header's write sequence, read now).
    std::uint64_t published_count() const;
    /// True once the writer has closed the file (not after a crash).
    bool writer_closed() const;
    /// True when the file is still marked open but no writer holds its lock: the writer died.
    bool writer_gone() const;
    /// True when `path` no longer names the file this reader has open (renamed, replaced or
    /// removed).
    using owned_file_reader::path;
    using owned_file_reader::replaced;
    std::string agent_name() const;
    std::uint32_t writer_pid() const;
    /// The header as the file holds it now (state, writer_pid, write_seq, ...). Throws
    /// format_error when the file was truncated below it.
    file_header header() const;

  private:
    /// Reads write_seq, fails on a file that shrank or went backwards, skips what was lost.
    void refresh();
    /// Reads the next slots (at most max_events, up to the wrap) and then claim_seq; a slot
    /// the writer claimed meanwhile comes back with seq 0.
    std::span<const slot> read_chunk(std::uint64_t max_events);

    std::uint64_t capacity_ = 0;
    std::uint64_t next_ = 0;
    std::uint64_t published_ = 0;
    std::uint64_t missed_ = 0;
    std::vector<slot> chunk_;
};

}  // namespace xtel::flight_recorder
