#pragma once
// xtel-exporter's command line: the options, their defaults and the usage text.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/host_port.hpp"
#include "xtel/node/collector.hpp"
#include "xtel/push/otlp_config.hpp"

namespace xtel::xtel_exporter {

/// sysexits.h: the command was used incorrectly.
inline constexpr int exit_usage = 64;

/// Whether this build has the remote-write client (CMake option XTEL_PUSH).
#if XTEL_HAVE_PUSH
inline constexpr bool have_push = true;
#else
inline constexpr bool have_push = false;
#endif

struct options {
    static constexpr std::chrono::seconds default_remote_write_interval{15};
    static constexpr std::chrono::seconds max_remote_write_interval{3600};

    std::filesystem::path dir = "/dev/shm";
    host_port listen = host_port::parse("--listen", "127.0.0.1:9465");
    std::uint64_t stale_ttl_s = 60;
    /// Where to push the series; empty: nowhere.
    std::string remote_write_url;
    std::chrono::seconds remote_write_interval = default_remote_write_interval;
    /// --remote-write-label NAME=VALUE, in the order given (a later one replaces an earlier of
    /// the same name); `instance` is added as <host name>:<port> unless given.
    std::vector<std::pair<std::string, std::string>> remote_write_labels;
    /// --otlp-*, checked with the OTEL_* variables when the program starts.
    push::otlp_flags otlp;
    /// The account to run as once the port is bound; empty: the one it was started as.
    std::string user;
    /// --allow-uid: the owners whose node files are served besides the uid it runs as (names
    /// resolved when the options are read).
    std::vector<uid_t> allowed_uids;
    std::uint64_t max_file_bytes = node::collector::default_max_file_bytes;
    std::uint64_t max_series = node::collector::default_max_series;
    /// --metrics: globs of the agents' families served; empty: all of them.
    std::vector<std::string> metrics;
    /// --nixl-buffer-dir: NIXL's BUFFER directory, whose rings are drained and served; empty:
    /// none (xtel/nixl/buffer_rings.hpp).
    std::filesystem::path nixl_buffer_dir;
    /// --nixl-multiproc-dir: NIXL's prometheus_mp directory, whose stores are read and served;
    /// empty: none (xtel/nixl/multiproc_stores.hpp).
    std::filesystem::path nixl_multiproc_dir;
    /// NIXL_TELEMETRY_COMPAT_NAMES, the agents' variable: also serve the refusal families
    /// renamed in this release under their old names (node_metrics), for one release.
    bool compat_names = false;
    bool help = false;
};

/// The text --help prints.
std::string_view usage() noexcept;

/// Reads the command line, and NIXL_TELEMETRY_COMPAT_NAMES from `lookup`; throws usage_error.
options parse_options(int argc, char** argv, const env_lookup& lookup = process_env);

}  // namespace xtel::xtel_exporter
