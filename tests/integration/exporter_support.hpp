#pragma once
// What the xtel-exporter tests share: xfer_demo agents publishing node files into a directory,
// the exporter over it, and the exporter's health lines read back.

#include <unistd.h>

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prometheus_support.hpp"
#include "test_util.hpp"

namespace exporter_it {

/// Whether this build runs under AddressSanitizer: its programs' resident sizes are then the
/// sanitizer's (shadow memory, a quarantine of freed blocks), not a release build's.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool address_sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool address_sanitized = true;
#else
constexpr bool address_sanitized = false;
#endif
#else
constexpr bool address_sanitized = false;
#endif

constexpr std::uint64_t transfers = 50;
constexpr std::uint64_t block = 65536;

/// The variables that name a rank (xtel/core/rank.hpp): a demo gets only those a test gives it, so
/// that a test run under a launcher (Slurm, mpirun) sees the labels it expects.
inline const std::vector<std::string> rank_variables = {
    "RANK",         "LOCAL_RANK",   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_PROCID", "SLURM_LOCALID"};

/// The options of xfer_demo moving `count` x block bytes as agent `name` (its target is
/// `name`_target) with the node exporter writing into `dir`; staying up `linger_s` seconds
/// after; with `env` set. `launcher` comes before the demo on its command line (setpriv,
/// unshare: what runs it as another user or in another namespace).
inline prom_it::spawn_options demo_options(
    const std::filesystem::path& dir,
    const std::string& name,
    int linger_s,
    std::vector<std::pair<std::string, std::string>> env = {},
    std::vector<std::string> launcher = {},
    std::uint64_t count = transfers) {
    prom_it::spawn_options o;
    o.argv = std::move(launcher);
    o.argv.insert(o.argv.end(),
                  {XTEL_XFER_DEMO, "--op", "write", "--total", std::to_string(count * block),
                   "--block", std::to_string(block), "--initiator-name", name, "--target-name",
                   name + "_target", "--linger", std::to_string(linger_s)});
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_METRIC_SET", "both"},
             {"NIXL_TELEMETRY_EXPORTER", "node"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.string()},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"}};
    o.env.insert(o.env.end(), env.begin(), env.end());
    o.unset = rank_variables;
    return o;
}

/// xfer_demo as demo_options() says, started.
inline prom_it::child_process start_demo(
    const xtel_test::temp_dir& dir,
    const std::string& name,
    int linger_s,
    std::vector<std::pair<std::string, std::string>> env = {}) {
    return prom_it::child_process(demo_options(dir.path(), name, linger_s, std::move(env)));
}

/// xtel-exporter over `dir` on a port the system picks, with `extra` arguments, after
/// `launcher` on its command line.
inline prom_it::child_process start_exporter(const std::filesystem::path& dir,
                                             std::vector<std::string> extra = {},
                                             std::vector<std::string> launcher = {}) {
    prom_it::spawn_options o;
    o.argv = std::move(launcher);
    o.argv.insert(o.argv.end(), {XTEL_EXPORTER, "--listen", "127.0.0.1:0", "--dir", dir.string()});
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    return prom_it::child_process(o);
}

inline prom_it::child_process start_exporter(const xtel_test::temp_dir& dir,
                                             std::vector<std::string> extra = {}) {
    return start_exporter(dir.path(), std::move(extra));
}

/// The prefix of agent `name`'s agent_tx_bytes_total line, written by process `pid`.
inline std::string tx_bytes(std::string_view name, pid_t pid) {
    return fmt::format(R"(agent_tx_bytes_total{{agent_name="{}",pid="{}",hostname=")", name, pid);
}

/// Files of `kind` (node_file, notice, span_ring) refused so far for `reason` in `body`;
/// nullopt when the pair has no series.
inline std::optional<std::string> refused(const std::string& body,
                                          std::string_view kind,
                                          std::string_view reason) {
    return prom_it::value_of(
        body, fmt::format(R"(xtel_exporter_files_refused_total{{kind="{}",reason="{}"}} )", kind,
                          reason));
}

/// Node files and notices refused so far in `body`, every reason together.
inline double read_errors(const std::string& body) {
    return prom_it::sum_of(body, R"(xtel_exporter_files_refused_total{kind="node_file",)") +
           prom_it::sum_of(body, R"(xtel_exporter_files_refused_total{kind="notice",)");
}

/// Node files and notices refused so far for `reason` in `body`, both kinds together; nullopt
/// when neither kind has a series of that reason.
inline std::optional<std::string> read_errors(const std::string& body, std::string_view reason) {
    const auto file = refused(body, "node_file", reason);
    const auto notice = refused(body, "notice", reason);
    if (!file && !notice) {
        return std::nullopt;
    }
    return std::to_string(std::stoull(file.value_or("0")) + std::stoull(notice.value_or("0")));
}

/// Every refusal reason, as the exporter's counter labels them.
inline const std::vector<std::string> refusal_reasons = {
    "foreign_owner",     "not_regular",   "too_large",    "unreadable",
    "not_node_file",     "damaged",       "bad_snapshot", "writer_mismatch",
    "writer_unverified", "name_mismatch", "series_limit", "bad_notice"};

}  // namespace exporter_it
