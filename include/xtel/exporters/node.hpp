#pragma once
/// The node exporter: the agent's whole metric model, published after every flush round into a
/// shared-memory file, `<directory>/<agent name>.metrics`, for one process per node
/// (xtel-exporter) to serve every agent of the node from (docs/node-format.md).
///
/// It serves the same metric model as the Prometheus exporter (xtel/metrics/agent_metrics.hpp:
/// in a pipeline, the pipeline's one model, folded once for both) and, instead of an HTTP
/// endpoint, writes each new snapshot, encoded (xtel/metrics/snapshot_codec.hpp) without the
/// labels its readers add (xtel_agent_info's pid), into the file with xtel/node/file.hpp's
/// writer: readers in other processes never see a torn snapshot and never hold a lock the
/// agent waits on. Beside it, the spans the back end's span stage hands it
/// (xtel/trace/span_stage.hpp) go into `<agent name>.spans` (xtel/trace/span_ring.hpp).
/// Recording threads never reach any of this.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/core/exporter.hpp"
#include "xtel/exporters/output_path.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_stage.hpp"

namespace xtel {

namespace node::file {
class writer;
}  // namespace node::file
namespace node {
class notice_writer;
enum class unpublished_reason : std::uint8_t;
}  // namespace node

/// What the node exporter is configured with.
struct node_settings {
    /// NIXL's meaning of NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH: a directory, as for the flight
    /// recorder, whose files sit beside these.
    static constexpr output_path_use output_path_as = output_path_use::directory;
    static constexpr const char* default_directory = "/dev/shm";
    /// Where `<agent name>.metrics` is created.
    std::filesystem::path directory{default_directory};
    /// Whether the transfers' spans go into `<agent name>.spans` beside the node file
    /// (NIXL_TELEMETRY_TRACE_*, docs/trace-format.md; the back end's span stage decides which
    /// transfers become spans); a budget of 0: no span ring.
    trace::sampler_settings spans;

    /// The directory is NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH when set (it must exist), else
    /// default_directory; `spans` from the NIXL_TELEMETRY_TRACE_* variables. Throws
    /// config_error. The metric model's variables are metrics::agent_metrics_settings'.
    static node_settings from_env(const config& cfg, const env_lookup& lookup = process_env);
};

class node_exporter {
  public:
    static constexpr std::string_view name = "node";
    using settings = node_settings;
    /// What it serves: the pipeline's one model of the agent's metrics.
    using metric_state = metrics::agent_metrics;
    /// What it writes beside the node file: the spans of the pipeline's span stage.
    using span_stage = trace::span_stage;

    /// As the pipeline builds it: serving the pipeline's model, which the pipeline folds and
    /// publishes; configured by `settings`, else from the environment (node_settings::from_env,
    /// which throws config_error). A file that cannot be created (a live writer of the same
    /// agent name, a directory it cannot write) is logged as an error, not thrown: the exporter
    /// stays off (disabled()), leaves an unpublished notice in the directory for the node to
    /// see, and the agent goes on transferring.
    explicit node_exporter(const metric_state_context<metric_state>& m,
                           const std::optional<node_settings>& settings = std::nullopt);
    ~node_exporter();
    node_exporter(const node_exporter&) = delete;
    node_exporter& operator=(const node_exporter&) = delete;

    /// Flusher thread only: the round's spans into the span ring; false once the ring is lost
    /// (the writer logged why), so that the stage counts them as dropped.
    bool export_spans(std::span<const span_stage::span_type> spans);
    /// Whether it has a span ring to write into and is on (spans configured, the ring made).
    bool takes_spans() const noexcept { return spans_ != nullptr && !disabled(); }
    /// Flusher thread only: writes the snapshot when the metrics changed since the last one.
    void on_flush_end();
    /// Flusher thread only: the last snapshot, then the file is marked closed.
    void on_stop();

    // Safe from any thread.
    /// True once the file could not be created or the writer gave up on it (the pipeline
    /// counts the events it loses from then on).
    bool disabled() const noexcept { return disabled_.load(std::memory_order_relaxed); }
    /// Snapshots written to the file so far.
    std::uint64_t snapshots_published() const noexcept {
        return published_.load(std::memory_order_relaxed);
    }
    /// The file's path (empty when it could not be created).
    const std::filesystem::path& path() const noexcept { return path_; }
    /// The span ring's path (empty when the agent writes no spans).
    std::filesystem::path spans_path() const;

  private:
    void publish();
    /// Leaves `<agent>.<pid>.unpublished` beside the node file, so that the node shows this
    /// agent and why its metrics are missing (xtel/node/notice.hpp); held until on_stop().
    void leave_notice(node::unpublished_reason reason, std::string_view why) noexcept;

    std::shared_ptr<metric_state> model_;
    std::unique_ptr<node::file::writer> writer_;
    std::filesystem::path path_;
    std::filesystem::path directory_;
    std::string agent_name_;
    std::unique_ptr<node::notice_writer> notice_;
    /// The span ring, `<agent>.spans` (null: no spans configured, or it could not be made).
    std::unique_ptr<trace::span_ring::writer> spans_;
    std::shared_ptr<const metrics::snapshot> last_;  // the snapshot written last
    std::vector<std::byte> encoded_;
    std::atomic<bool> disabled_{false};
    std::atomic<std::uint64_t> published_{0};
};

}  // namespace xtel
