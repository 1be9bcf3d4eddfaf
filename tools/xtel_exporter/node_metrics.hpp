#pragma once
// What xtel-exporter serves and pushes: every agent's snapshot from the node files, its own
// health, and its process's metrics.

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "xtel/http/metrics_body.hpp"
#include "xtel/http/server.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/node/collector.hpp"

namespace xtel::nixl {
class buffer_rings;
class multiproc_stores;
}  // namespace xtel::nixl

namespace xtel::xtel_exporter {

/// What a pusher (remote write, OTLP) has counted: push::http_pusher's counters, and for OTLP
/// the points receivers said they rejected.
struct push_counts {
    std::uint64_t sent = 0;
    std::uint64_t failed_attempts = 0;
    std::uint64_t dropped = 0;
    std::uint64_t rejected = 0;
    std::uint64_t queued = 0;
    std::uint64_t rejected_points = 0;
};

/// One pusher's health families, `xtel_exporter_<prefix>_requests_sent_total` and the rest,
/// read by `probe` from the server's and the main thread.
struct push_health {
    std::string prefix;  ///< remote_write, otlp
    std::string what;    ///< for HELP: "Remote-write", "OTLP"
    std::function<push_counts()> probe;
    /// Whether the receiver answers with rejected points (OTLP's partial success).
    bool counts_points = false;
};

/// The node's agents and the exporter's own health. Called from the HTTP server's thread
/// (scrapes) and the main thread (the rescan, the remote write), so everything is behind one
/// mutex.
class node_metrics {
  public:
    using clock = std::chrono::steady_clock;

    /// Collects as `collector` says (node::collector::settings). The files are read from
    /// start() on; before it only the exporter's own health is served, with each pusher's
    /// families and every refusal reason at 0.
    /// `extra`, when set, gives families of the exporter's own served after its health (the
    /// span export's).
    /// `files` lists the directory for the collector (node::collector's second constructor);
    /// its refusals are xtel_exporter_files_refused_total{kind, reason}.
    /// `old_names` (NIXL_TELEMETRY_COMPAT_NAMES) also serves them, for one release, as the
    /// families before it: xtel_exporter_snapshot_read_errors_total{reason} (node files and
    /// notices) and xtel_exporter_span_files_refused_total{reason} (span rings, when listed).
    node_metrics(node::collector::settings collector,
                 node::scanner& files,
                 std::vector<push_health> pushers = {},
                 std::function<metrics::snapshot()> extra = {},
                 bool old_names = false);

    /// Also serves the NIXL agents of `rings` (--nixl-buffer-dir) and of `stores`
    /// (--nixl-multiproc-dir), in that order after the node files' agents, and their refusals
    /// as xtel_exporter_files_refused_total{kind="nixl_ring"} and {kind="nixl_store"}. Before
    /// start(); both outlive this. Null: none of that kind.
    void serve_nixl(nixl::buffer_rings* rings, nixl::multiproc_stores* stores);
    /// Drains the NIXL rings into their agents' models if they were not drained for
    /// nixl_drain_interval, between refreshes: NIXL drops the events a full ring has no slot
    /// for. Returns when to call it again; nullopt without rings.
    std::optional<clock::time_point> drain_nixl_rings(clock::time_point now);
    /// A ring of NIXL's default 4096 events, drained this often, holds 1,024 transfers: 10,240
    /// a second before NIXL drops what it has no slot for.
    static constexpr auto nixl_drain_interval = std::chrono::milliseconds(100);

    /// Allows reading the files (once the process runs as the user it serves as), and reads
    /// them.
    void start();

    /// Lists the directory and reads every file, unless that was done less than
    /// min_refresh_interval ago (or `force`), or before start().
    void refresh(bool force = false);

    /// Everything a scrape shows, refreshed as refresh() would: the agents' snapshots, then
    /// the exporter's health, then the process's metrics.
    std::vector<std::shared_ptr<const metrics::snapshot>> snapshots(bool force_refresh = false);

    /// The answer to a scrape in representation `r`; the time it took joins the health.
    /// Concurrent scrapes of an unchanged state share one body per representation: it is
    /// rendered again when an agent's snapshot changes, or a second after it was rendered. So
    /// the process's metrics and the exporter's own (scrape durations, read errors, pushers,
    /// the endpoint's closed connections) may lag by up to a second: those of the scrapes that
    /// took a shared body show in the next rendering.
    http::entity answer(http::representation r);

    /// Where answer() reads the /metrics endpoint's counters (until set: zeros).
    void count_endpoint(std::function<http::server_stats()> probe);

  private:
    struct push_families {
        push_health health;
        metrics::family_id sent, failed_attempts, dropped, rejected, queued;
        std::optional<metrics::family_id> rejected_points;
    };

    /// One pusher's health families, registered in store_.
    push_families add_push_families(push_health h);
    /// Every series of the exporter's own families made now, at 0: the first scrape shows them.
    void make_series_at_zero();
    /// The families no agent's file may stand in for or add series to: the exporter's own
    /// (its health, the pushers', the span export's, the endpoint's, the agents' states) and
    /// the process's.
    std::vector<std::string> own_family_names();
    /// The one series of a family without labels.
    metrics::series_ref series(metrics::family_id f);
    /// Sets every series of xtel_exporter_files_refused_total, and of the old families when
    /// they are served, from the scanner's counts (made at 0 by the first call).
    void set_refusals();
    /// The series of xtel_exporter_families_left_out_total for reason `r`.
    metrics::series_ref left_out_series(node::collector::left_out r);
    void refresh_locked(bool force);

    std::mutex mutex_;
    node::scanner& files_;
    node::collector collector_;
    bool started_ = false;
    /// The agents' snapshots, then xtel_exporter_agent_state's and
    /// xtel_exporter_agent_unpublished's (`extras_`).
    std::vector<std::shared_ptr<const metrics::snapshot>> agents_served_;
    /// What extras_ were made from: each agent's snapshot and state, and the live notices.
    std::vector<std::pair<std::shared_ptr<const metrics::snapshot>, node::collector::writer_state>>
        states_;
    std::vector<node::notice> notices_;
    std::vector<std::shared_ptr<const metrics::snapshot>> extras_;
    std::optional<clock::time_point> refreshed_;
    metrics::metric_store store_;
    metrics::family_id agents_;
    metrics::family_id unpublished_;
    metrics::family_id seen_;
    metrics::family_id refused_;
    /// The families before xtel_exporter_files_refused_total, served when old names are.
    std::optional<metrics::family_id> old_read_errors_, old_span_refused_;
    metrics::family_id families_left_out_;
    metrics::family_id duration_;
    std::vector<push_families> pushers_;
    std::function<metrics::snapshot()> extra_;
    nixl::buffer_rings* nixl_rings_ = nullptr;
    nixl::multiproc_stores* nixl_stores_ = nullptr;
    std::optional<clock::time_point> nixl_drained_;
    /// When the exporter started: its own cumulative values' start.
    std::uint64_t start_time_us_;

    // The bodies answer() shares, behind their own mutex, taken before mutex_: the main
    // thread's refreshes do not wait for a rendering.
    /// The agents' snapshots as refresh() left them (mutex_ held while read).
    std::vector<std::shared_ptr<const metrics::snapshot>> served_agents();
    std::mutex cache_mutex_;
    std::function<http::server_stats()> endpoint_probe_;
    /// The agents' snapshots the bodies show, held so that equal pointers mean equal data.
    std::vector<std::shared_ptr<const metrics::snapshot>> cached_agents_;
    std::optional<clock::time_point> cached_at_;
    /// The agents', the health's and the process's snapshots, and their bodies.
    http::metrics_body body_;
};

}  // namespace xtel::xtel_exporter
