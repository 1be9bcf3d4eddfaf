#include "options.hpp"

#include "xtel/metrics/agent_metrics_settings.hpp"

#include <fmt/format.h>

#include <charconv>

#include "xtel/core/parse.hpp"
#include "xtel/core/suggest.hpp"
#include "xtel/node/allowed_uids.hpp"
#include "xtel/node/file.hpp"
#include "xtel/push/push_url.hpp"

namespace xtel::xtel_exporter {

namespace {

constexpr std::string_view usage_text =
    "Usage: xtel-exporter [--dir DIR] [--listen HOST:PORT] [--stale-ttl SECONDS]\n"
    "                     [--remote-write URL [--remote-write-interval SECONDS]\n"
    "                      [--remote-write-label NAME=VALUE]...] [--otlp-endpoint URL\n"
    "                      [--otlp-protocol P] [--otlp-temporality T] [--otlp-compression C]\n"
    "                      [--otlp-interval SECONDS] [--otlp-header NAME=VALUE]...]\n"
    "                     [--user NAME] [--allow-uid UID|NAME[,...]]...\n"
    "                     [--max-file-bytes BYTES] [--max-series N] [--metrics GLOB[,...]]...\n"
    "                     [--nixl-buffer-dir DIR] [--nixl-multiproc-dir DIR]\n"
    "\n"
    "Serves on one /metrics the metrics every agent of this node publishes into\n"
    "DIR/<agent name>.metrics (NIXL_TELEMETRY_EXPORTER=node), and its own health. Each series\n"
    "carries agent_name and the writer's pid, and rank and local_rank when the agent's\n"
    "environment names them (RANK, LOCAL_RANK; else OMPI_COMM_WORLD_RANK,\n"
    "OMPI_COMM_WORLD_LOCAL_RANK; else SLURM_PROCID, SLURM_LOCALID). DIR is watched (inotify)\n"
    "and listed again every few seconds. A file is served only when the uid it runs as (or\n"
    "--allow-uid) owns it and its live writer is the process its header names; the others\n"
    "are logged once and counted in xtel_exporter_files_refused_total by kind and reason.\n"
    "\n"
    "  --dir DIR             the agents' NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH (default /dev/shm)\n"
    "  --listen HOST:PORT    where to serve /metrics (default 127.0.0.1:9465; port 0 picks one)\n"
    "  --stale-ttl SECONDS   how long an agent that has stopped is still served (default 60)\n"
    "  --allow-uid UID|NAME[,...]\n"
    "                        also serve the node files these users own (repeatable); by\n"
    "                        default only the files of the user it runs as (after --user)\n"
    "  --max-file-bytes BYTES\n"
    "                        refuse, unread, a node file larger than this (default 32M;\n"
    "                        K, M, G: 1024, 1024^2, 1024^3)\n"
    "  --max-series N        time series served for the whole node at most (default\n"
    "                        100000); a file that would pass it is refused whole, files\n"
    "                        taken in name order\n"
    "  --metrics GLOB[,...]  serve only the agents' families whose names one of the globs\n"
    "                        matches (*, ?, [...]; repeatable), e.g. 'xtel_transfer_*,\n"
    "                        xtel_errors_total'; the agents' own choice\n"
    "                        (NIXL_TELEMETRY_METRIC_SET, _ENABLED_METRICS) is narrowed,\n"
    "                        never widened. xtel-exporter's own families are always served\n"
    "  --nixl-buffer-dir DIR also serve the NIXL agents that write NIXL's BUFFER rings into DIR\n"
    "                        (their NIXL_TELEMETRY_DIR; NIXL_TELEMETRY_ENABLE=y, no exporter),\n"
    "                        as if they used xtel's plug-in. It drains the rings: it is their\n"
    "                        one reader, and takes their events from any other reader\n"
    "  --nixl-multiproc-dir DIR\n"
    "                        also serve the NIXL agents whose prometheus_mp exporter keeps its\n"
    "                        stores in DIR (their NIXL_TELEMETRY_MULTIPROC_DIR), read only,\n"
    "                        each while its writer lives, as if they used xtel's plug-in\n"
    "                        (but for xtel's latency histograms, which a store cannot fill)\n"
    "  --remote-write URL    also push the same series to a Prometheus remote-write receiver\n"
    "                        (e.g. http://prometheus:9090/api/v1/write), retrying while it is\n"
    "                        down; xtel_exporter_remote_write_* count how it goes"
#if !XTEL_HAVE_PUSH
    "\n                        (not in this build: XTEL_PUSH was off)"
#endif
    "\n"
    "  --remote-write-interval SECONDS\n"
    "                        how often to push (default 15, 1 to 3600)\n"
    "  --remote-write-label NAME=VALUE\n"
    "                        a label for every series pushed (repeatable), as Prometheus's\n"
    "                        external_labels: a series' own label of that name wins.\n"
    "                        instance=<host name>:<port> unless given (instance= drops it)\n"
    "\n"
    "  OTLP (OpenTelemetry collectors), configured by the OTEL_EXPORTER_OTLP_* and OTEL_*\n"
    "  variables (docs/otlp.md); these flags override them:\n"
    "  --otlp-endpoint URL   push the same metrics over OTLP/HTTP to URL/v1/metrics\n"
    "                        (e.g. http://collector:4318); xtel_exporter_otlp_* count how\n"
    "                        it goes"
#if !XTEL_HAVE_PUSH
    "\n                        (not in this build: XTEL_PUSH was off)"
#endif
    "\n"
    "  --otlp-protocol http/protobuf|http/json    (default http/protobuf)\n"
    "  --otlp-temporality cumulative|delta|lowmemory    (default cumulative)\n"
    "  --otlp-compression gzip|none                (default none)\n"
    "  --otlp-interval SECONDS                     how often to push (default 60, 1 to 3600)\n"
    "  --otlp-header NAME=VALUE                    a header for every push (repeatable)\n"
    "  Traces: with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT set (and\n"
    "  OTEL_TRACES_EXPORTER not none), the agents' spans (<dir>/<agent>.spans) are pushed to\n"
    "  <endpoint>/v1/traces by the OTEL_EXPORTER_OTLP_TRACES_* variables (no flags);\n"
    "  xtel_exporter_spans_* and xtel_exporter_otlp_traces_* count how it goes\n"
    "\n"
    "  --user NAME           started as root: run as NAME once the port is bound. NAME must\n"
    "                        be able to read the agents' files (mode 0600: the agents' user)\n"
    "  --help                this text\n"
    "  --version             the version of xtel\n"
    "\n"
    "  NIXL_TELEMETRY_COMPAT_NAMES=1 (the agents' variable) also serves, for this release,\n"
    "  the refusal families renamed in it under their old names\n"
    "  (xtel_exporter_snapshot_read_errors_total, xtel_exporter_span_files_refused_total)\n";

constexpr std::string_view option_names[] = {"--dir",
                                             "--listen",
                                             "--stale-ttl",
                                             "--remote-write",
                                             "--remote-write-interval",
                                             "--remote-write-label",
                                             "--otlp-endpoint",
                                             "--otlp-protocol",
                                             "--otlp-temporality",
                                             "--otlp-compression",
                                             "--otlp-interval",
                                             "--otlp-header",
                                             "--user",
                                             "--allow-uid",
                                             "--max-file-bytes",
                                             "--max-series",
                                             "--metrics",
                                             "--nixl-buffer-dir",
                                             "--nixl-multiproc-dir"};

/// A Prometheus label name a push may add: [a-zA-Z_][a-zA-Z0-9_]*, not reserved (__*) and not
/// one the series' form gives (le).
bool valid_label_name(std::string_view n) {
    if (n.empty() || n.starts_with("__") || n == "le") {
        return false;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!letter && (i == 0 || c < '0' || c > '9')) {
            return false;
        }
    }
    return true;
}

/// Bytes, as digits with an optional K, M or G (1024, 1024^2, 1024^3): 32M.
std::uint64_t byte_size(std::string_view option,
                        std::string_view value,
                        std::uint64_t min,
                        std::uint64_t max,
                        std::string_view accepted) {
    std::uint64_t scale = 1;
    std::string_view digits = value;
    if (!digits.empty()) {
        switch (digits.back()) {
            case 'K':
                scale = std::uint64_t{1} << 10;
                break;
            case 'M':
                scale = std::uint64_t{1} << 20;
                break;
            case 'G':
                scale = std::uint64_t{1} << 30;
                break;
            default:
                break;
        }
    }
    if (scale != 1) {
        digits.remove_suffix(1);
    }
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() ||
        n > max / scale || n * scale < min) {
        parse::fail(option, value, accepted);
    }
    return n * scale;
}

bool is_option(std::string_view arg) {
    for (const auto name : option_names) {
        if (arg == name) {
            return true;
        }
    }
    return false;
}

void set(options& o, std::string_view arg, std::string_view value) {
    if (arg == "--dir") {
        o.dir = parse::existing_directory("--dir", value);
    } else if (arg == "--nixl-buffer-dir") {
        o.nixl_buffer_dir = parse::existing_directory("--nixl-buffer-dir", value);
    } else if (arg == "--nixl-multiproc-dir") {
        o.nixl_multiproc_dir = parse::existing_directory("--nixl-multiproc-dir", value);
    } else if (arg == "--listen") {
        o.listen = host_port::parse("--listen", value);
    } else if (arg == "--stale-ttl") {
        o.stale_ttl_s = parse::unsigned_integer("--stale-ttl", value, 0, 365 * 86400);
    } else if (arg == "--remote-write") {
        if (!have_push) {
            throw usage_error(
                "--remote-write is not in this build of xtel-exporter: it was built with "
                "XTEL_PUSH=OFF (protobuf, snappy and libcurl are needed for it)");
        }
        push::check_push_url("--remote-write", value, "http://prometheus:9090/api/v1/write");
        o.remote_write_url = value;
    } else if (arg == "--remote-write-label") {
        const auto eq = value.find('=');
        if (eq == std::string_view::npos || !valid_label_name(value.substr(0, eq))) {
            parse::fail("--remote-write-label", value,
                        "expected NAME=VALUE, NAME a label name ([a-zA-Z_][a-zA-Z0-9_]*, not "
                        "starting __, not le)");
        }
        const std::string name(value.substr(0, eq));
        std::erase_if(o.remote_write_labels, [&](const auto& l) { return l.first == name; });
        o.remote_write_labels.emplace_back(name, value.substr(eq + 1));
    } else if (arg == "--remote-write-interval") {
        o.remote_write_interval = std::chrono::seconds(parse::unsigned_integer(
            "--remote-write-interval", value, 1,
            static_cast<std::uint64_t>(options::max_remote_write_interval.count())));
    } else if (!have_push && arg.starts_with("--otlp-")) {
        // Refused whatever its value, as --remote-write is: accepted, a mistyped interval or
        // header would pass unnoticed in a build that could never use it.
        throw usage_error(
            fmt::format("{} is not in this build of xtel-exporter: it was built with XTEL_PUSH=OFF "
                        "(protobuf and libcurl are needed for OTLP)",
                        arg));
    } else if (arg == "--otlp-endpoint") {
        o.otlp.endpoint = value;
    } else if (arg == "--otlp-protocol") {
        o.otlp.protocol = value;
    } else if (arg == "--otlp-temporality") {
        o.otlp.temporality = value;
    } else if (arg == "--otlp-compression") {
        o.otlp.compression = value;
    } else if (arg == "--otlp-interval") {
        o.otlp.interval_s = value;
    } else if (arg == "--otlp-header") {
        o.otlp.headers.emplace_back(value);
    } else if (arg == "--allow-uid") {
        const auto uids = node::parse_allowed_uids("--allow-uid", value);
        o.allowed_uids.insert(o.allowed_uids.end(), uids.begin(), uids.end());
    } else if (arg == "--max-file-bytes") {
        // The smallest: a new node file (the header and two 64 KiB areas). The largest: what
        // a writer's file reaches with payloads at the format's 256 MiB limit.
        o.max_file_bytes =
            byte_size("--max-file-bytes", value,
                      node::file::header_size + 2 * node::file::initial_area_capacity,
                      std::uint64_t{1} << 30 << 2,
                      "expected a number of bytes from 131328 (a new node file) to 4G, with an "
                      "optional K, M or G (1024, 1024^2, 1024^3)");
    } else if (arg == "--max-series") {
        o.max_series = parse::unsigned_integer("--max-series", value, 1, 100'000'000);
    } else if (arg == "--metrics") {
        auto globs = metrics::agent_metrics_settings::parse_enabled_metrics("--metrics", value);
        if (globs.empty()) {
            parse::fail("--metrics", value, "expected at least one metric name or glob");
        }
        o.metrics.insert(o.metrics.end(), globs.begin(), globs.end());
    } else {
        if (value.empty()) {
            parse::fail("--user", value, "expected the name of an account");
        }
        o.user = value;
    }
}

}  // namespace

std::string_view usage() noexcept {
    return usage_text;
}

options parse_options(int argc, char** argv, const env_lookup& lookup) {
    options o;
    if (const auto v = lookup(env::compat_names)) {
        try {
            o.compat_names = parse::boolean(env::compat_names, *v);
        } catch (const config_error& e) {
            throw usage_error(e.what());
        }
    }
    bool interval_given = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            o.help = true;
            continue;
        }
        const parse::option_arg split = parse::split_option(arg);
        arg = split.name;
        std::string_view value = split.value;
        const bool has_value = split.has_value;
        if (!is_option(arg)) {
            throw usage_error(
                fmt::format("'{}' is not an option{}: expected --dir, --listen, --stale-ttl, "
                            "--remote-write, --remote-write-interval, --remote-write-label, "
                            "--otlp-endpoint, --otlp-protocol, --otlp-temporality, "
                            "--otlp-compression, --otlp-interval, --otlp-header, "
                            "--user, --allow-uid, --max-file-bytes, --max-series, --metrics, "
                            "--nixl-buffer-dir, --nixl-multiproc-dir or --help",
                            arg, did_you_mean(arg, option_names)));
        }
        if (!has_value) {
            if (i + 1 >= argc) {
                throw usage_error(fmt::format("{} needs a value", arg));
            }
            value = argv[++i];
        }
        interval_given =
            interval_given || arg == "--remote-write-interval" || arg == "--remote-write-label";
        try {
            set(o, arg, value);
        } catch (const config_error& e) {
            throw usage_error(e.what());
        }
    }
    if (interval_given && o.remote_write_url.empty() && !o.help) {
        throw usage_error(
            "--remote-write-interval and --remote-write-label need --remote-write URL");
    }
    return o;
}

}  // namespace xtel::xtel_exporter
