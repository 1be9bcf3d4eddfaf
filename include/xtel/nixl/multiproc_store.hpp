#pragma once
/// A store of NIXL's prometheus_mp exporter, read by xtel-exporter --nixl-multiproc-dir. With
/// NIXL_TELEMETRY_EXPORTER=prometheus_mp each NIXL agent keeps its totals in
/// `$NIXL_TELEMETRY_MULTIPROC_DIR/nixl.<pid>.<number>.<agent index>.mmap`, a file of 6,800 bytes
/// it maps and holds an exclusive flock(2) on for life. The layout, little-endian, as NIXL 1.5.1
/// writes it (schema 1, checked on its wheel's files, docs/nixl.md):
///
///   @0    magic "NIXLMPS1"            @8    schema u32 (1)        @12   slot count u32 (21)
///   @16   pid i64                     @24   last update ns u64    @32   agent index u64
///   @40   bucket count u64 (<= 32)    @48   agent name [256]      @304  hostname [128]
///   @432  local rank [64]             @496  bucket bounds f64[32], microseconds
///   @752  counters u64[21]            @920  gauges u64[21]
///   @1088 histogram buckets u64[21][33], per bucket (not cumulative), the last bound's
///         successor the +Inf bucket     @6632 histogram sums u64[21]
///
/// Slots are NIXL's event types (xtel/nixl/abi_v2.hpp): counters are cumulative (XFER_TIME's
/// and XFER_POST_TIME's are the times' sums), gauges the last value, the histograms those of
/// the two times. The strings are NUL-terminated in their fields.
///
/// The file may hold anything (another process of its owner may have written it), so every
/// field is checked before it is used; a reader reads it with pread, never maps it: a file
/// truncated under the reader is an error, not a SIGBUS. NIXL updates the store in place
/// without a sequence count, so a read may see one update's counter and not yet its histogram
/// (as NIXL's own collector does); each field is whole (aligned 8-byte words).

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/nixl/abi_v2.hpp"

namespace xtel::nixl::multiproc_store {

inline constexpr std::string_view magic = "NIXLMPS1";
/// The one schema read: any other is refused, never guessed at.
inline constexpr std::uint32_t schema = 1;
inline constexpr std::uint32_t slot_count = abi_v2::event_type_count;
inline constexpr std::size_t max_bounds = 32;
inline constexpr std::size_t bucket_slots = max_bounds + 1;
inline constexpr std::uint64_t file_size = 6800;

/// A store's fields, checked.
struct store {
    std::int64_t pid = 0;
    std::uint64_t last_update_ns = 0;
    std::uint64_t agent_index = 0;
    std::string agent_name;
    std::string hostname;
    std::string local_rank;
    /// Strictly increasing, finite and positive: bucket count of them.
    std::vector<double> bounds;
    std::array<std::uint64_t, slot_count> counters{};
    std::array<std::uint64_t, slot_count> gauges{};
    /// Per slot, bounds.size() + 1 buckets (the last +Inf), not cumulative.
    std::array<std::vector<std::uint64_t>, slot_count> buckets;
    std::array<std::uint64_t, slot_count> sums{};
};

enum class verdict {
    ok,
    /// No magic yet, the rest all zero: NIXL has sized the file and not yet written it.
    not_ready,
    not_nixl,  ///< a magic, schema, slot or bucket count that is not a NIXL layout read here
    damaged,   ///< a NIXL store of the wrong size, or with a field no NIXL writes
};

struct checked {
    verdict what = verdict::ok;
    /// For a refusal: what was found and what is accepted, for the log line.
    std::string why;
    store fields;
};

/// Decodes and checks `bytes`, the whole file.
checked check(std::span<const std::uint8_t> bytes);

/// Reads the whole of the store open as `fd` and checks it (a file that shrank or grew since it
/// was listed is damaged).
checked read(int fd);

}  // namespace xtel::nixl::multiproc_store
