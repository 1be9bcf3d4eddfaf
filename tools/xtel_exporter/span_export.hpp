#pragma once
// The agents' spans, exported as OTLP traces: every `<agent>.spans` file (the span ring,
// xtel/trace/span_ring.hpp) of the directory's latest listing, opened by the directory's
// scanner (xtel/node/scanner.hpp) and so trusted by the node files' rules, read every poll
// interval and pushed to the traces' receiver. Built only with the push clients.

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
#include "xtel/node/scanner.hpp"
#include "xtel/push/otlp_traces.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::xtel_exporter {

class span_export {
  public:
    using clock_type = std::chrono::steady_clock;

    struct settings {
        /// How often the files are read.
        std::chrono::milliseconds interval{500};
        /// The most spans one file gives one poll; the rest wait for the next.
        std::size_t max_spans_per_file = 4096;
        /// The most spans one poll reads from all files together (one request).
        std::size_t max_spans_per_poll = 16384;
    };

    /// Reads the span rings `files` lists (it must list them: scanner::settings::span_rings),
    /// which outlives this; throws std::invalid_argument when it does not list them.
    span_export(settings s, node::scanner& files, push::otlp_trace_options o);
    ~span_export();
    span_export(const span_export&) = delete;
    span_export& operator=(const span_export&) = delete;

    /// When the next poll is due.
    clock_type::time_point due() const noexcept { return next_; }

    /// Reads the files of the scanner's latest listing and pushes what they hold, if a poll is
    /// due at `now`. A span ring that arrives, leaves or is replaced is seen at the next
    /// listing (the collector's refresh).
    void poll_if_due(clock_type::time_point now);

    /// The counters, as xtel-exporter's own families (any thread).
    metrics::snapshot health() const;

    const push::otlp_trace_pusher& pusher() const noexcept { return pusher_; }

  private:
    struct file;

    /// Opens the span rings new to `l`, lets go of those gone from it or replaced.
    void sync(const node::listing& l);
    /// Reads `f` (at most `budget` spans) into `out`; false when it is to be forgotten.
    bool read(file& f, std::size_t budget, std::vector<push::otlp_agent_spans>& out);
    void refuse(const std::string& name, node::refusal r, std::string_view why);

    settings settings_;
    node::scanner& scanner_;
    /// The number of the listing sync() took last.
    std::uint64_t synced_ = 0;
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
    std::uint64_t start_time_us_;
};

}  // namespace xtel::xtel_exporter
