#pragma once
/// NIXL's BUFFER exporter's ring, read by its one reader (xtel-exporter --nixl-buffer-dir). With
/// NIXL_TELEMETRY_ENABLE=y and no NIXL_TELEMETRY_EXPORTER, each NIXL agent writes its events into
/// `$NIXL_TELEMETRY_DIR/<agent name>`, a file it maps: a 40-byte header, then `capacity` events
/// of 16 bytes (abi_v2::event). The header, little-endian, as NIXL 1.5.1 writes it (checked on
/// its wheel's files, docs/nixl.md): write position u64 at 0, read position u64 at 8, version
/// i32 at 16, expected version i32 at 20, capacity u64 at 24, mask (capacity - 1) u64 at 32. The
/// positions are slot indexes (0 to capacity - 1): NIXL writes at the write position and stops
/// when the next would meet the read position; the reader takes the events between them and
/// moves the read position up to the write position. So a ring has one reader, and that reader
/// writes the file.
///
/// The file may hold anything (another process of its owner may have written it), so every
/// value is checked before it is used, and it is read and written with pread and pwrite, never
/// mapped: a file truncated under the reader is an error, not a SIGBUS.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xtel/nixl/abi_v2.hpp"

namespace xtel::nixl::buffer_ring {

inline constexpr std::uint64_t header_size = 40;
inline constexpr std::uint64_t event_size = sizeof(abi_v2::event);
static_assert(event_size == 16, "NIXL's ring holds its 16-byte nixlTelemetryEvent");
/// The layout versions read: 3 (NIXL's event types 0 to 19) and 4 (NIXL 1.5.1: type 20, events
/// dropped, added). Both have the header above; any other version is refused.
inline constexpr std::int32_t oldest_version = 3;
inline constexpr std::int32_t newest_version = 4;
/// The most events a ring read may hold (NIXL_TELEMETRY_BUFFER_SIZE is 4096 by default): a
/// larger claim is refused, and so is any file larger than such a ring.
inline constexpr std::uint64_t max_capacity = std::uint64_t{1} << 20;
inline constexpr std::uint64_t max_file_bytes = header_size + event_size * max_capacity;

struct header {
    std::uint64_t write_pos = 0;
    std::uint64_t read_pos = 0;
    std::int32_t version = 0;
    std::int32_t expected_version = 0;
    std::uint64_t capacity = 0;
    std::uint64_t mask = 0;
};

/// What a header says of its file.
enum class verdict {
    ok,
    /// All zero: NIXL has sized the file and not yet written its header. Looked at again.
    not_ready,
    not_nixl,  ///< a version, capacity or mask that is not a NIXL layout read here
    damaged,   ///< a NIXL header whose file is not the size it names, or a position outside it
};

struct checked {
    verdict what = verdict::ok;
    /// For a refusal: what was found and what is accepted, for the log line.
    std::string why;
    header head;
};

/// Decodes and checks the first bytes of a ring file of `file_size` bytes. `bytes` may be
/// shorter than header_size (a truncated file): damaged.
checked check(std::span<const std::uint8_t> bytes, std::uint64_t file_size);

/// The events of slots `from` up to, not including, `to` (wrapping at the capacity) of a ring
/// whose slots are `slots` (capacity * event_size bytes), appended to `out`. Positions past the
/// capacity give nothing.
void copy_events(std::span<const std::uint8_t> slots,
                 const header& h,
                 std::uint64_t from,
                 std::uint64_t to,
                 std::vector<abi_v2::event>& out);

/// One ring open for reading and writing (the descriptor is the caller's).
class reader {
  public:
    explicit reader(int fd) noexcept : fd_(fd) {}

    /// Appends the events written since the last drain to `out` and gives their slots back to
    /// NIXL. The first call checks the header; every call checks that it still says what it
    /// said then. A refusal leaves `out` as it was.
    checked drain(std::vector<abi_v2::event>& out);

  private:
    int fd_;
    std::optional<header> first_;
    std::vector<std::uint8_t> slots_;
};

}  // namespace xtel::nixl::buffer_ring
