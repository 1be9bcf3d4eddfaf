#pragma once
// The agents' spans, exported as OTLP traces: every `<agent>.spans` file (the span ring,
// xtel/trace/span_ring.hpp) in the directory, trusted by the node files' rules, read every
// poll interval and pushed to the traces' receiver. Built only with the push clients.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/metrics/snapshot.hpp"
#include "xtel/push/otlp_traces.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::xtel_exporter {

/// Why a span file is not read; the reason label of xtel_exporter_span_files_refused_total.
enum class span_refusal : std::uint8_t {
    foreign_owner,  ///< owned by a uid that is not allowed (--allow-uid)
    not_regular,    ///< a link, FIFO, device or directory under a span file's name
    too_large,      ///< larger than the largest span ring
    unreadable,     ///< cannot be opened or read
    not_span_file,  ///< another magic, version or layout
    damaged,        ///< a span ring whose head or slots cannot be (read, then refused)
};
inline constexpr std::size_t span_refusal_count = 6;

class span_export {
  public:
    using clock_type = std::chrono::steady_clock;

    struct settings {
        std::filesystem::path dir;
        /// Owners besides this process's effective uid whose files are read (--allow-uid).
        std::vector<uid_t> allowed_uids;
        /// How often the files are read.
        std::chrono::milliseconds interval{500};
        /// The most spans one file gives one poll; the rest wait for the next.
        std::size_t max_spans_per_file = 4096;
        /// The most spans one poll reads from all files together (one request).
        std::size_t max_spans_per_poll = 16384;
    };

    span_export(settings s, push::otlp_trace_options o);
    ~span_export();
    span_export(const span_export&) = delete;
    span_export& operator=(const span_export&) = delete;

    /// When the next poll is due.
    clock_type::time_point due() const noexcept { return next_; }

    /// Reads the files and pushes what they hold, if a poll is due at `now`.
    void poll_if_due(clock_type::time_point now);

    /// The counters, as xtel-exporter's own families (any thread).
    metrics::snapshot health() const;

    const push::otlp_trace_pusher& pusher() const noexcept { return pusher_; }

  private:
    struct file;

    void scan();
    /// Reads `f` (at most `budget` spans) into `out`; false when it is to be forgotten.
    bool read(file& f, std::size_t budget, std::vector<push::otlp_agent_spans>& out);
    void refuse(const std::string& name, span_refusal r, std::string_view why);

    settings settings_;
    push::otlp_trace_pusher pusher_;
    clock_type::time_point next_ = clock_type::now();
    /// By file name.
    std::map<std::string, std::unique_ptr<file>> files_;
    /// Files deleted or replaced since the last poll, read once more before they are dropped.
    std::vector<std::unique_ptr<file>> leaving_;

    std::atomic<std::uint64_t> read_{0};
    std::atomic<std::uint64_t> lost_{0};
    std::atomic<std::uint64_t> queued_{0};
    std::atomic<std::uint64_t> files_open_{0};
    std::atomic<std::uint64_t> refused_[span_refusal_count]{};
    std::uint64_t start_time_us_;
};

}  // namespace xtel::xtel_exporter
