#pragma once
// What xtel-exporter serves and pushes: every agent's snapshot from the node files, its own
// health, and its process's metrics.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exporters/prometheus/negotiate.hpp"
#include "node/node_collector.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::exporter_program {

/// What the remote writer has counted (node::remote_writer's counters), served as health.
struct remote_write_counts {
    std::uint64_t sent = 0;
    std::uint64_t failed_attempts = 0;
    std::uint64_t dropped = 0;
    std::uint64_t rejected = 0;
    std::uint64_t queued = 0;
};

/// Reads the remote writer's counters; from the server's and the main thread.
using remote_write_probe = std::function<remote_write_counts()>;

/// The node's agents and the exporter's own health. Called from the HTTP server's thread
/// (scrapes) and the main thread (the rescan, the remote write), so everything is behind one
/// mutex.
class node_metrics {
  public:
    using clock = std::chrono::steady_clock;

    /// Collects `dir` (see node_collector for `stale_ttl`). The files are read from start() on;
    /// before it only the exporter's own health is served. With a `remote_write` probe the
    /// remote-write health families are served too, at 0 from the start.
    node_metrics(const std::filesystem::path& dir,
                 clock::duration stale_ttl,
                 remote_write_probe remote_write = {});

    /// Allows reading the files (once the process runs as the user it serves as), and reads
    /// them.
    void start();

    /// Lists the directory and reads every file, unless that was done less than
    /// min_refresh_interval ago (or `force`), or before start().
    void refresh(bool force = false);

    /// Everything a scrape shows, refreshed as refresh() would: the agents' snapshots, then
    /// the exporter's health, then the process's metrics.
    std::vector<std::shared_ptr<const metrics::snapshot>> snapshots(bool force_refresh = false);

    /// The body of a scrape in representation `r`; the time it took joins the health.
    std::shared_ptr<const std::string> render(detail::representation r);

  private:
    struct remote_write_families {
        metrics::family_id sent, failed_attempts, dropped, rejected, queued;
    };

    /// The one series of a family without labels.
    metrics::series_ref series(metrics::family_id f);
    void refresh_locked(bool force);

    std::mutex mutex_;
    detail::node_collector collector_;
    bool started_ = false;
    std::vector<std::shared_ptr<const metrics::snapshot>> agents_served_;
    std::optional<clock::time_point> refreshed_;
    metrics::metric_store store_;
    metrics::family_id agents_;
    metrics::family_id seen_;
    metrics::family_id errors_;
    metrics::family_id duration_;
    remote_write_probe remote_write_;
    std::optional<remote_write_families> remote_write_families_;
};

}  // namespace xtel::exporter_program
