#pragma once
/// The node files of one directory, found and read for xtel-exporter and `xtel top` (private to
/// src/): every agent of the node publishes its metric model into `<dir>/<agent name>.metrics`
/// (docs/node-format.md), and the collector turns the files into snapshots to render.
///
/// The directory may be writable by other users (/dev/shm is), so a file is served only when
/// the directory's scanner trusts it (xtel/node/scanner.hpp: an allowed owner, a regular file
/// within the size limit), its live writer is the process its header names, and its series fit
/// the node's cap; anything else is refused with a reason (docs/deployment.md, "What is
/// refused"), logged once per change of the file's state and counted in the scanner.
///
/// Beside them it reads the unpublished notices (xtel/node/notice.hpp) of agents that could not
/// publish a node file, by the same trust rules, and lists those whose agent is alive.
///
/// Not thread-safe: xtel-exporter and xtel top call it under one lock.

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/metrics/snapshot.hpp"
#include "xtel/node/notice.hpp"
#include "xtel/node/scanner.hpp"

namespace xtel::node::file {
class reader;
}
namespace xtel::node::detail {
class flock_holders;
}

namespace xtel::node {

class collector {
  public:
    using clock = std::chrono::steady_clock;

    /// A node file larger than this is refused unread. A 10,000-series agent's file is
    /// 1.2 MB (10,000 time series) to 8.5 MB (10,000 series of the metric model, most of them
    /// histograms with exemplars); the writer's file stays under four times its payload.
    static constexpr std::uint64_t default_max_file_bytes = 32 << 20;
    /// Time series served for the whole node at most (as Prometheus counts them: one per
    /// sample line); a file that would pass it is refused whole.
    static constexpr std::uint64_t default_max_series = 100'000;

    struct settings {
        std::filesystem::path dir;
        /// A file whose writer has closed it or died is served for this long from when the
        /// collector first saw it so, then left out (the file itself is left alone).
        clock::duration stale_ttl = std::chrono::seconds(60);
        /// What its log lines start with ("xtel-exporter").
        std::string program;
        /// The owners whose files are served besides the uid this process runs as (its
        /// effective uid when it lists the directory: after --user).
        std::vector<uid_t> allowed_uids;
        std::uint64_t max_file_bytes = default_max_file_bytes;
        std::uint64_t max_series = default_max_series;
        /// Families the program serves itself (xtel-exporter's health and process families):
        /// an agent's family of such a name is left out, so that no file can stand in for
        /// them or add series to them.
        std::vector<std::string> reserved_families;
        /// Globs (fnmatch) of the agents' families served; empty: all. The others are left
        /// out of every agent's snapshot, each logged once.
        std::vector<std::string> families;
    };

    /// Why a family is left out of an agent's snapshot: the values of
    /// xtel_exporter_families_left_out_total's `reason` label.
    enum class left_out : std::uint8_t {
        type_conflict,  ///< a file whose name sorts first gives the family another type
        reserved_name,  ///< the program serves a family of that name itself
        /// in OpenMetrics its names are another file's family's (openmetrics_names.hpp)
        name_clash,
    };
    static constexpr std::size_t left_out_count = 3;
    static std::string_view name_of(left_out r) noexcept;

    /// Whether the writer of a file is still there, as the file's state and lock tell.
    enum class writer_state {
        live,    ///< a writer holds the file's lock
        closed,  ///< its writer closed it (the agent stopped)
        dead,    ///< nobody holds the lock, and the file was not closed (the writer died)
    };

    /// One file served: its latest snapshot and how its writer stands.
    struct agent {
        std::shared_ptr<const metrics::snapshot> snapshot;
        writer_state state = writer_state::live;
        /// When the writer stopped: when this collector found it closed or dead, or, for one
        /// stopped before the collector first saw it, the file's last change; set unless live.
        std::optional<clock::time_point> ended;
        /// When the writer published `snapshot`, microseconds since the epoch.
        std::uint64_t published_us = 0;
    };

    /// Lists the directory with a scanner of its own, made from `s`.
    explicit collector(settings s);
    /// Lists the directory with `files`, which other readers of it share (xtel-exporter's span
    /// export reads the span rings of its listings) and which outlives this collector. Throws
    /// std::invalid_argument when `files` lists another directory, or trusts other owners or
    /// another size of node file than `s` says.
    collector(settings s, scanner& files);
    ~collector();

    collector(const collector&) = delete;
    collector& operator=(const collector&) = delete;

    /// The settings of a scanner that agrees with `s` (its directory, owners and node file
    /// size), listing span rings too when `span_rings`.
    static scanner::settings scanner_settings(const settings& s, bool span_rings = false);

    /// Lists the directory (a listing of the scanner's, which its other readers take too): opens
    /// the node files and notices new to it, drops those gone from it, reopens those replaced. A
    /// file refused when opened (foreign_owner, not_regular, too_large, unreadable, not_node_file)
    /// is tried again only when it changes. A file gone between the listing and its opening is
    /// nothing to report. Throws nothing: a directory that cannot be read is logged (once until it
    /// can be read again) and leaves the files as they were.
    void scan() noexcept;

    /// Reads the latest payload of every file, at `now`, and returns the snapshots to serve, in
    /// the order of the files' names, each with a `pid` label (the writer's) after its own.
    /// A family that an earlier file (by name) gives another type is left out of the later
    /// file's snapshot.
    std::vector<std::shared_ptr<const metrics::snapshot>> refresh(clock::time_point now);

    /// As refresh(), with each writer's state.
    std::vector<agent> refresh_agents(clock::time_point now);

    /// The unpublished notices whose agent is alive (its lock held), at the last refresh, in
    /// the order of their file names: agents that could not publish their node file.
    const std::vector<notice>& unpublished() const noexcept { return unpublished_; }

    /// Files whose series are served (after the last refresh).
    std::size_t served() const noexcept { return served_; }
    /// Writers (file, process) opened so far.
    std::uint64_t seen_total() const noexcept { return seen_total_; }
    /// Node files and notices refused so far, all reasons together; each counted once per
    /// change of its state.
    std::uint64_t read_errors_total() const noexcept;
    /// Node files and notices refused so far for `r`.
    std::uint64_t read_errors(refusal r) const noexcept;
    /// Families left out of a file for `r`; each (file, family) counted once per time it
    /// starts.
    std::uint64_t families_left_out(left_out r) const noexcept {
        return left_out_[static_cast<std::size_t>(r)];
    }

    const settings& config() const noexcept { return settings_; }
    /// The scanner that lists the directory for this collector.
    const scanner& files() const noexcept { return files_; }

    /// Adds to settings::reserved_families: the program's own families, once it has made them.
    void reserve_families(std::vector<std::string> names);

  private:
    struct source {
        std::unique_ptr<node::file::reader> reader;
        file_identity id;
        /// Refused until the file changes: not read again while its identity stays `id`.
        bool refused = false;
        /// The state last reported (logged and counted): a refusal, or none (served, or not
        /// refused yet). Kept across the files that follow one another under the name.
        std::optional<refusal> reported;
        /// The latest payload decoded, with the pid label added; null until one was.
        std::shared_ptr<const metrics::snapshot> latest;
        std::uint64_t number = 0;        ///< of the payload `latest` was decoded from
        std::uint64_t published_us = 0;  ///< when that payload was published
        std::uint64_t series = 0;        ///< time series of `latest`
        std::uint64_t payload_bytes = 0;
        /// Counted in seen_total_ (once per file opened, however often it is refused since).
        bool seen = false;
        /// A payload read but not decoded because its series would pass the cap: its number
        /// and series, so that it is not read again while the cap leaves it out.
        std::uint64_t over_cap_number = 0;
        std::uint64_t over_cap_series = 0;
        /// When the writer stopped (stopped_at), and how.
        std::optional<clock::time_point> ended;
        /// This collector has seen the writer live: it stopped after the refresh before.
        bool seen_live = false;
        writer_state state = writer_state::live;
        /// `latest` less the families left out for a type conflict, and their names (sorted).
        std::shared_ptr<const metrics::snapshot> served;
        std::vector<std::string> left_out;
    };

    /// An unpublished notice, as listed and read.
    struct notice_source {
        file_identity id;
        /// Open while the notice may still be a live agent's (its lock is tested at every
        /// refresh); -1 once refused or found dead: looked at again only when it changes.
        int fd = -1;
        notice record;
        bool logged = false;  ///< its warning was logged

        notice_source() = default;
        notice_source(notice_source&& o) noexcept;
        notice_source& operator=(notice_source&& o) noexcept;
        ~notice_source();
    };

    /// Opens and reads the notice `name` of `l` by the directory's rules, refusing it
    /// otherwise.
    void open_notice(const listing& l, const std::string& name, notice_source& n);
    void refuse_notice(const std::string& name, refusal r, std::string_view why);
    /// The notices whose lock is held, logged once each.
    void check_notices();

    /// What the writer check says of a file at this refresh.
    enum class verdict { serve, refuse, undecided };

    void open(const listing& l, const std::string& name, source& s);
    /// Reports `r` for the file `name` unless it is the state reported last.
    void report(const std::string& name,
                source& s,
                std::optional<refusal> r,
                std::string_view why = {});
    /// Refuses the file until it changes.
    void refuse(const std::string& name, source& s, refusal r, std::string_view why);
    void drop_snapshot(source& s) noexcept;
    /// When the writer of `s`, found closed or dead at `now`, stopped: `now` if this collector
    /// saw it live before, else the file's last change (its close, or a dead writer's last
    /// publication).
    static clock::time_point stopped_at(const source& s, clock::time_point now);
    verdict check_writer(const std::string& name, source& s, clock::time_point now);
    /// Reads and decodes the file's latest payload if it is new and fits `budget` series.
    /// False when the file is refused for the cap.
    bool read(source& s, std::uint64_t budget);
    /// The lock holders of device `dev`, read once per refresh.
    const detail::flock_holders& holders(dev_t dev);
    /// Leaves out of the chosen files' snapshots the families settings::families does not
    /// choose, those an earlier file gives another type and those whose OpenMetrics names
    /// clash, logging and counting each (file, family) once.
    void resolve_type_conflicts(const std::vector<std::pair<const std::string*, source*>>& chosen);
    /// Where a family was first seen: its type, and its file (null: the program's own family).
    struct family_origin {
        metrics::metric_type type;
        const std::string* file;
    };
    struct family_types;
    /// The first type and file of every family of the chosen files (in their order), and the
    /// families that take no part or clash in OpenMetrics.
    family_types types_of(const std::vector<std::pair<const std::string*, source*>>& chosen);
    /// Logs and counts `f` of `file` left out, for why `first` says.
    void report_left_out(const std::string& file,
                         const metrics::family_snapshot& f,
                         const family_origin& first);
    void remember_gone(const std::string& name, const source& s);
    void release_memory() noexcept;

    settings settings_;
    /// The scanner made for this collector alone, if it was given none.
    std::unique_ptr<scanner> own_files_;
    scanner& files_;
    std::map<std::string, source> sources_;         // by file name
    std::map<std::string, notice_source> notices_;  // by file name
    std::vector<notice> unpublished_;
    /// Names gone from the directory while refused, with their reason and when they went: a
    /// file deleted and made again with the same fault is not reported again.
    std::map<std::string, std::pair<refusal, clock::time_point>> gone_;
    std::vector<std::pair<dev_t, std::unique_ptr<detail::flock_holders>>>
        holders_;  // this refresh's
    std::size_t served_ = 0;
    std::uint64_t seen_total_ = 0;
    std::array<std::uint64_t, left_out_count> left_out_{};
    /// Whether settings::families chooses `family`; logs, once, one that it does not.
    bool chosen_family(std::string_view family);
    /// Names of left-out families remembered for logging once: a bound, since files may make
    /// any number of names.
    static constexpr std::size_t max_logged_not_chosen = 4096;
    /// Families settings::families leaves out, logged once each.
    std::set<std::string, std::less<>> not_chosen_;
    /// Payload bytes of snapshots dropped since memory was last given back.
    std::uint64_t dropped_bytes_ = 0;
};

}  // namespace xtel::node
