#pragma once
// The pushers --remote-write and OTLP ask for, and when each pushes next. Built from
// pushers.cpp where xtel has its push clients (XTEL_PUSH), from pushers_off.cpp where it does
// not: the choice is CMake's, so the main loop is the same code in both builds.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node_metrics.hpp"
#include "options.hpp"
#include "xtel/core/host_port.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/node/scanner.hpp"
#include "xtel/push/otlp_config.hpp"
#include "xtel/push/otlp_traces.hpp"

namespace xtel::xtel_exporter {

class pushers {
  public:
    using clock_type = std::chrono::steady_clock;

    /// The OTLP settings the variables and flags ask for; nullopt: no OTLP. Throws usage_error
    /// (also for OTLP asked of a build without it).
    static std::optional<push::otlp_options> otlp_settings(const options& o);

    /// The OTLP traces settings the variables ask for; nullopt: no traces (the span files are
    /// not read). Throws usage_error (also for traces asked of a build without OTLP).
    static std::optional<push::otlp_trace_options> trace_settings(const options& o);

    /// The span export, with traces, reads the span rings `files` lists (which outlives this).
    pushers(const options& o,
            node::scanner& files,
            std::optional<push::otlp_options> otlp,
            std::optional<push::otlp_trace_options> traces = std::nullopt);
    ~pushers();
    pushers(const pushers&) = delete;
    pushers& operator=(const pushers&) = delete;

    /// Their counters, for the health families.
    std::vector<push_health> health() const;
    /// The span export's own families (xtel_exporter_spans_*); empty when traces are off.
    std::function<metrics::snapshot()> span_health() const;

    /// Sets the labels every remote-written series gets: --remote-write-label's, and instance
    /// as <host name>:<port of `bound`> unless given; a label given with an empty value is left
    /// out. Called once the port is bound.
    void label(const options& o, const host_port& bound);

    /// When the next push is due; nullopt when there is nothing to push.
    std::optional<clock_type::time_point> due() const noexcept;

    /// Pushes `source`'s series, read afresh, to each pusher that is due at `now`; reads the span
    /// files and pushes their spans when that is due.
    void push_if_due(node_metrics& source, clock_type::time_point now);

  private:
    struct state;
    std::unique_ptr<state> state_;
};

}  // namespace xtel::xtel_exporter
