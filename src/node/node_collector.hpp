#pragma once
/// The node files of one directory, found and read for xtel-exporter and `xtel top` (private to
/// src/): every agent of the node publishes its metric state into `<dir>/<agent name>.metrics`
/// (docs/node-format.md), and the collector turns the files into snapshots to render.
///
/// Not thread-safe: the exporter calls it under one lock.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xtel/metrics/snapshot.hpp"

namespace xtel::node_file {
class reader;
}

namespace xtel::detail {

class node_collector {
  public:
    using clock = std::chrono::steady_clock;

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
        /// When the collector first saw the writer closed or dead; set unless live.
        std::optional<clock::time_point> ended;
        /// When the writer published `snapshot`, microseconds since the epoch.
        std::uint64_t published_us = 0;
    };

    /// Collects `dir`; a file whose writer has closed it or died is served for `stale_ttl` from
    /// when the collector first saw it so, then left out (the file itself is left alone). Its
    /// log lines start with `program` ("xtel-exporter").
    node_collector(std::filesystem::path dir, clock::duration stale_ttl, std::string program);
    ~node_collector();

    node_collector(const node_collector&) = delete;
    node_collector& operator=(const node_collector&) = delete;

    /// Lists the directory: opens the files new to it, drops those gone from it, reopens those
    /// replaced. A file that cannot be opened is logged and counted once, and tried again only
    /// when it changes. Throws nothing: a directory that cannot be read is logged (once until
    /// it can be read again) and leaves the files as they were.
    void scan() noexcept;

    /// Reads the latest payload of every file, at `now`, and returns the snapshots to serve, in
    /// the order of the files' names, each with a `pid` label (the writer's) after its own.
    std::vector<std::shared_ptr<const metrics::snapshot>> refresh(clock::time_point now);

    /// As refresh(), with each writer's state.
    std::vector<agent> refresh_agents(clock::time_point now);

    /// Files whose series are served (after the last refresh).
    std::size_t served() const noexcept { return served_; }
    /// Writers (file, process) opened so far.
    std::uint64_t seen_total() const noexcept { return seen_total_; }
    /// Files refused so far: not a node file, damaged, or a payload that does not decode;
    /// each counted once until it changes.
    std::uint64_t read_errors_total() const noexcept { return read_errors_total_; }

  private:
    /// A file as stat(2) sees it: a file refused once is tried again only when this changes.
    struct identity {
        std::uint64_t dev = 0;
        std::uint64_t ino = 0;
        std::uint64_t size = 0;
        std::int64_t mtime_ns = 0;

        friend bool operator==(const identity&, const identity&) = default;
    };

    struct source {
        std::unique_ptr<node_file::reader> reader;
        /// The latest payload decoded, with the pid label added; null until one was.
        std::shared_ptr<const metrics::snapshot> latest;
        std::uint64_t number = 0;        ///< of the payload `latest` was decoded from
        std::uint64_t published_us = 0;  ///< when that payload was published
        /// When the writer was first seen closed or dead, and how.
        std::optional<clock::time_point> ended;
        writer_state state = writer_state::live;
        /// Refused: not served, not read again until the file changes.
        std::optional<identity> refused;
    };

    void open(const std::string& name, source& s, const identity& id);
    void refuse(const std::string& name, source& s, const identity& id, std::string_view why);
    void read(const std::string& name, source& s, clock::time_point now);

    std::filesystem::path dir_;
    clock::duration stale_ttl_;
    std::string program_;
    std::map<std::string, source> sources_;  // by file name
    bool dir_failed_ = false;
    std::size_t served_ = 0;
    std::uint64_t seen_total_ = 0;
    std::uint64_t read_errors_total_ = 0;
};

}  // namespace xtel::detail
