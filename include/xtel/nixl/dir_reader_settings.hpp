#pragma once
/// What a reader of a directory of NIXL's own telemetry files is made with: the BUFFER rings'
/// (xtel/nixl/buffer_rings.hpp) and the prometheus_mp stores' (xtel/nixl/multiproc_stores.hpp).

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "xtel/metrics/agent_metrics_settings.hpp"

namespace xtel::nixl {

struct dir_reader_settings {
    std::filesystem::path dir;
    /// What its log lines start with ("xtel-exporter").
    std::string program;
    /// The owners whose files are read besides this process's effective uid.
    std::vector<uid_t> allowed_uids;
    /// What every agent's model is made with, and so the sets and families served
    /// (NIXL_TELEMETRY_METRIC_SET, _ENABLED_METRICS of the reader's environment). A ring's
    /// reader leaves the rank out: it is the reader's, not the agent's.
    metrics::agent_metrics_settings model;
    /// Globs (fnmatch) of the families served (xtel-exporter's --metrics); empty: all.
    std::vector<std::string> families;
};

}  // namespace xtel::nixl
