#pragma once
// What `xtel top` shows, apart from the terminal: each agent's numbers read from its snapshot,
// rates and latency percentiles from two readings, the rows sorted and filtered, and the frame
// laid out as lines of text. Nothing here reads a file or writes to the terminal, so the tests
// give it snapshots and readings of their own and check the text.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/metrics/snapshot.hpp"
#include "xtel/node/collector.hpp"

namespace xtel::top {

using clock = std::chrono::steady_clock;
using writer_state = node::collector::writer_state;

/// Native (exponential) buckets added up (xtel/metrics/native_histogram.hpp): bucket i ends at
/// native::upper_bound(i, schema) of the family's shown unit, `per_second` of which make a
/// second. Series of other schemas are brought to the lowest before they are added.
struct native_latency {
    int schema = 0;
    double per_second = 1;
    std::map<std::int32_t, std::uint64_t> buckets;  ///< by index, NOT cumulative; no zeros
    std::uint64_t zero_count = 0;                   ///< observations of 0

    friend bool operator==(const native_latency&, const native_latency&) = default;
};

/// A latency histogram, every series of the agent's family added up: from its classic bounds,
/// or from its native buckets when it keeps only those (no bounds).
struct latency_histogram {
    std::vector<double> bounds;          ///< upper bounds in seconds, increasing; +Inf implied
    std::vector<std::uint64_t> buckets;  ///< observations per bound, NOT cumulative
    std::uint64_t count = 0;             ///< every observation, those above every bound included
    /// A native-only family's buckets (then bounds and buckets are empty); nullopt: classic.
    std::optional<native_latency> native;

    friend bool operator==(const latency_histogram&, const latency_histogram&) = default;
};

/// Adds series `s`'s native buckets (at its native_schema) into `into`, bringing both to the
/// lower of their schemas.
void add_native(native_latency& into, const metrics::series& s);

/// The observations `now` holds that `before`, an earlier reading of the same histogram, did
/// not: bucket by bucket, native ones at the lower schema of the two. nullopt when they cannot
/// be compared (other bounds, one classic and one native) or a bucket or the count went back.
std::optional<latency_histogram> growth(const latency_histogram& now,
                                        const latency_histogram& before);

/// One agent's cumulative numbers at one reading, as its snapshot holds them.
struct sample {
    std::string name;
    std::uint64_t pid = 0;              ///< 0: not known
    std::optional<std::uint64_t> rank;  ///< the `rank` label, when the agent has one
    writer_state state = writer_state::live;
    /// For a writer that closed or died: when it published its last numbers.
    std::optional<clock::time_point> last_published;
    std::uint64_t tx_bytes = 0;
    std::uint64_t rx_bytes = 0;
    std::uint64_t transfers = 0;  ///< completed requests, both directions
    /// Bytes of memory registered now: what peers may read or write. nullopt when the snapshot
    /// has no memory family.
    std::optional<std::uint64_t> memory;
    /// Remote agents loaded and usable now (xtel_connections); nullopt without the xtel set.
    std::optional<std::uint64_t> peers;
    latency_histogram latency;
    /// Errors by kind, every kind the agent counts (zeros included), in the family's order.
    std::vector<std::pair<std::string, std::uint64_t>> errors;
    std::uint64_t dropped = 0;  ///< records dropped because a staging ring was full
};

/// Reads an agent's numbers from its snapshot (the collector's: agent_name and pid labels).
/// Bytes and requests come from NIXL's counters (agent_tx_bytes_total...), or from
/// xtel_transfer_*_total{status="success"} when the legacy builder is off; latency from
/// xtel_transfer_duration_seconds, or agent_xfer_time_us; errors from xtel_errors_total{kind},
/// or agent_errors_total{status}; drops from xtel_telemetry_events_dropped_total; memory from
/// xtel_memory_registered_bytes, or agent_memory_registered_total minus
/// agent_memory_deregistered_total; peers from xtel_connections. A counter family that is
/// missing counts as 0; memory and peers stay unknown.
sample sample_of(const metrics::snapshot& s,
                 writer_state state = writer_state::live,
                 std::optional<clock::time_point> last_published = std::nullopt);

/// The `q` quantile (0 to 1) of the observations in a histogram, interpolated linearly within
/// the bucket it falls in (the first bucket from 0), as Prometheus's histogram_quantile does:
/// the highest finite bound when it falls above every bound; nullopt with no observation.
std::optional<double> quantile(double q,
                               const std::vector<double>& bounds,
                               const std::vector<std::uint64_t>& buckets,
                               std::uint64_t count);
/// The same of `h`, classic or native. Native buckets are taken as classic buckets of their
/// bounds (each from the one below it, the lowest from 0, the zero bucket at 0), so a quantile
/// is within its bucket: at schema 3, within 9% of the value.
std::optional<double> quantile(double q, const latency_histogram& h);

/// One line of the table: an agent's rates over the last interval and its totals.
struct row {
    std::string name;
    std::uint64_t pid = 0;
    std::optional<std::uint64_t> rank;
    writer_state state = writer_state::live;
    /// For a writer that closed or died, how old its last numbers are (0 while live).
    std::chrono::seconds stale_for{0};
    /// Per second over the interval; nullopt without an earlier reading of this process, or
    /// when its counters went back.
    std::optional<double> tx_rate;
    std::optional<double> rx_rate;
    std::optional<double> transfer_rate;
    /// Seconds, over the interval; from the whole histogram when nothing was timed in it
    /// (`latency_since_start`); nullopt when nothing was ever timed.
    std::optional<double> p50;
    std::optional<double> p99;
    bool latency_since_start = false;
    std::uint64_t tx_bytes = 0;
    std::uint64_t rx_bytes = 0;
    /// Whether the agent completed a transfer of its own. Transfers are one-sided: the agent
    /// whose memory a peer reads or writes sees nothing of it, so an agent that initiated none
    /// shows no bytes or rates rather than zeros that would read as "nothing arrived".
    bool initiated = false;
    std::optional<std::uint64_t> memory;
    std::optional<std::uint64_t> peers;
    /// The kinds with errors, the most first.
    std::vector<std::pair<std::string, std::uint64_t>> errors;
    std::uint64_t errors_total = 0;
    std::uint64_t dropped = 0;
};

/// The row of `now`, against `before` (an earlier reading of the same agent, `elapsed`
/// earlier; null for none), at `at`.
row make_row(const sample& now,
             const sample* before,
             std::chrono::duration<double> elapsed,
             clock::time_point at);

/// Keeps the previous reading of every agent, to turn the next into rows.
class rate_tracker {
  public:
    /// Rows for `samples` read at `at`, each against the previous reading of the same agent
    /// name and pid; the readings replace the previous ones.
    std::vector<row> update(std::vector<sample> samples, clock::time_point at);

  private:
    std::map<std::pair<std::string, std::uint64_t>, sample> previous_;
    clock::time_point previous_at_{};
};

/// The table's columns, in the order shown.
enum class column {
    agent,
    pid,
    rank,
    state,
    tx_rate,
    rx_rate,
    transfer_rate,
    p50,
    p99,
    tx_total,
    rx_total,
    memory,
    peers,
    dropped,
    errors,
};

/// The name --sort takes for `c` ("tx", "p99").
std::string_view column_key(column c) noexcept;
/// The column of a --sort name; nullopt for an unknown name.
std::optional<column> column_from_key(std::string_view key) noexcept;
/// The --sort names, comma-separated, for usage and error messages.
std::string column_keys();
/// The column after `c` (`forward`) or before it, round the end: the `s` and `S` keys.
column next_column(column c, bool forward = true) noexcept;

/// Whether `name` matches the shell pattern `pattern` (*, ?, [...] and [!...]; \ quotes the
/// next character). A pattern with none of * ? [ matches the names that contain it; an empty
/// one matches every name.
bool name_matches(std::string_view pattern, std::string_view name);

/// Sorts by `by`: names and pids up, numbers (rates, totals, latencies) down, `reverse` the
/// other way round; a missing value last either way; ties by name, then pid.
void sort_rows(std::vector<row>& rows, column by, bool reverse);

/// Human units, at most 7 characters: 1023B, 1.50KiB, 12.5MiB, 123GiB.
std::string format_bytes(double bytes);
/// A count or a rate: 0, 7.5, 123, 12.3k, 1.23M.
std::string format_count(double n);
/// A duration: 850ns, 17.5us, 1.25ms, 2.00s.
std::string format_seconds(double s);

/// What a frame shows besides the rows.
struct frame_options {
    std::string dir;
    std::chrono::duration<double> interval{1.0};
    column sort = column::tx_rate;
    bool reverse = false;
    std::string filter;
    /// Wall-clock time shown in the title ("22:50:01"); empty: none.
    std::string time;
    /// Limits in characters and lines; 0: none.
    std::size_t width = 0;
    std::size_t height = 0;
    /// Node files the collector could not read so far.
    std::uint64_t read_errors = 0;
    /// Lines shown under the totals, whatever the filter: the agents that could not publish
    /// (unpublished_line) and the straggler peers (straggler.hpp).
    std::vector<std::string> notices;
    /// The latest message (a file not read, a directory gone); empty: none.
    std::string message;
    /// A live view: a line with the keys, and the filter being typed when `editing_filter`.
    bool interactive = false;
    bool editing_filter = false;
};

/// The frame's line for an agent that could not publish its node file (its unpublished notice,
/// xtel/node/notice.hpp): "not published: agent pub-a pid 42 could not publish
/// /dev/shm/pub-a.metrics: name_taken: <the agent's error>".
std::string unpublished_line(const node::notice& n);

/// A frame: lines of printable ASCII, none longer than the width.
struct frame {
    std::vector<std::string> lines;
    /// The line of column headers, and where in it the sorted column's header is:
    /// [sort_begin, sort_end), cut to the width (for the terminal to highlight).
    std::size_t header_line = 0;
    std::size_t sort_begin = 0;
    std::size_t sort_end = 0;
};

/// Lays out `rows` (every agent read) filtered and sorted as `o` says: a title, a line of exact
/// totals over the agents shown, the table, and, when interactive, the message and the keys.
frame format_frame(std::vector<row> rows, const frame_options& o);

}  // namespace xtel::top
