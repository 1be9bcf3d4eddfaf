#pragma once
/// The NIXL agents of a BUFFER directory (NIXL_TELEMETRY_DIR), served by xtel-exporter as if they
/// used xtel's plug-in (--nixl-buffer-dir, docs/nixl.md): each ring `<agent name>` is drained
/// (xtel/nixl/buffer_ring.hpp), its events mapped as the plug-in maps a flush
/// (nixl/event_mapping.hpp) into an xtel metric model of that agent, whose snapshot is served.
///
/// The directory may be writable by others, so its rings are listed and opened by the node
/// directory's rules (xtel/node/scanner.hpp: an allowed owner, a regular file, not a link, not
/// larger than a ring read here); a ring that is not a NIXL layout read here is refused, logged
/// once per file and counted as xtel_exporter_files_refused_total{kind="nixl_ring"}, and nothing
/// of it is served. A ring whose file goes is no longer served.
///
/// The reader takes the ring's events: it is the ring's one reader, and any other reader of it
/// (NIXL's telemetry_reader example, a second xtel-exporter) then sees only some of them.
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

class buffer_rings {
  public:
    using settings = dir_reader_settings;

    explicit buffer_rings(settings s);
    ~buffer_rings();
    buffer_rings(const buffer_rings&) = delete;
    buffer_rings& operator=(const buffer_rings&) = delete;

    /// Lists the directory, drains every ring trusted, and returns the agents' snapshots in the
    /// order of their names. Throws nothing.
    std::vector<std::shared_ptr<const metrics::snapshot>> refresh() noexcept;

    /// The directory's scanner: its refusal counts are nixl_ring's.
    const node::scanner& files() const noexcept { return files_; }

    /// One ring and its agent's model (buffer_rings.cpp).
    struct ring;

  private:
    void open(const node::listing& l, const std::string& name, ring& r);
    void drain(const std::string& name, ring& r);
    void refuse(const std::string& name, ring& r, node::refusal why, const std::string& what);

    settings settings_;
    node::scanner files_;
    std::map<std::string, ring> rings_;
};

}  // namespace xtel::nixl
