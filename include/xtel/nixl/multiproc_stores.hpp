#pragma once
/// The NIXL agents of a prometheus_mp directory (NIXL_TELEMETRY_MULTIPROC_DIR), served by
/// xtel-exporter as xtel agents (--nixl-multiproc-dir, docs/nixl.md): each live store
/// (xtel/nixl/multiproc_store.hpp) is read, never written, and served as one agent, in the sets
/// its settings name (NIXL_TELEMETRY_METRIC_SET, as for BUFFER rings). The NIXL set: NIXL's
/// families, shaped as xtel's NIXL set serves them (xtel/metrics/agent_metrics.hpp) and valued
/// as NIXL's prometheus_mp serves them, histograms included. xtel's set, as far as a store
/// tells: its counters' increments since the last read are fed to a model of the agent as the
/// plug-in maps NIXL's events (nixl/event_model.hpp), so bytes and requests by direction, errors
/// by kind, memory registered and events dropped are NIXL's totals exactly; a store holds no
/// transfer, so xtel's latency histograms (by operation, which a store's one histogram does not
/// tell) and the registration counts are not served.
///
/// The directory may be writable by others, so its stores are listed and opened by the node
/// directory's rules (xtel/node/scanner.hpp: an allowed owner, a regular file, not a link, not
/// larger than a store); a store that is not NIXL's schema 1, or whose flock(2) is held by
/// another process than the pid its header names, is refused, logged once per file and counted
/// as xtel_exporter_files_refused_total{kind="nixl_store"}, and nothing of it is served. A store
/// whose lock no process holds was left by a writer that ended: it is not served, and not
/// counted either. Liveness is read from /proc/locks; a probe lock (shared, non-blocking,
/// dropped at once) is taken only when /proc/locks shows no holder, so that it never meets a
/// live writer's exclusive lock: NIXL makes a new file for each agent and never locks an old
/// one again.
///
/// Not thread-safe: xtel-exporter calls it under its one lock.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xtel/metrics/agent_metrics_settings.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/nixl/dir_reader_settings.hpp"
#include "xtel/node/scanner.hpp"

namespace xtel::nixl {

namespace multiproc_store {
struct store;
}
}  // namespace xtel::nixl
namespace xtel::node::detail {
class flock_holders;
}
namespace xtel::nixl {

class multiproc_stores {
  public:
    using settings = dir_reader_settings;

    explicit multiproc_stores(settings s);
    ~multiproc_stores();
    multiproc_stores(const multiproc_stores&) = delete;
    multiproc_stores& operator=(const multiproc_stores&) = delete;

    /// Lists the directory, reads every live store trusted, and returns the agents' snapshots
    /// in the order of their file names. Throws nothing.
    std::vector<std::shared_ptr<const metrics::snapshot>> refresh() noexcept;

    /// The directory's scanner: its refusal counts are nixl_store's.
    const node::scanner& files() const noexcept { return files_; }

    /// The snapshot of `s` served with the families of `model` (the NIXL set's, as a model
    /// makes them at 0): each family's series, valued from the store.
    static metrics::snapshot snapshot_of(const multiproc_store::store& s,
                                         const std::vector<metrics::family_snapshot>& model);

    /// One store file (multiproc_stores.cpp).
    struct store_file;

  private:
    void open(const node::listing& l, const std::string& name, store_file& f);
    void read(const std::string& name, store_file& f);
    /// Whether the writer the store names holds its lock; refuses `f` when another does.
    bool writer_live(const std::string& name, store_file& f, std::int64_t pid);
    void refuse(const std::string& name, store_file& f, node::refusal why, const std::string& what);

    settings settings_;
    node::scanner files_;
    /// The NIXL set's families, as served: their specs, with the series a model makes at 0
    /// (none when the settings serve xtel's set alone).
    std::vector<metrics::family_snapshot> families_;
    /// The settings of each store's model of xtel's set; nullopt: the NIXL set alone.
    std::optional<metrics::agent_metrics_settings> xtel_model_;
    std::map<std::string, store_file> stores_;
    /// /proc/locks as read at this refresh (for the directory's device), once.
    std::unique_ptr<node::detail::flock_holders> holders_;
};

}  // namespace xtel::nixl
