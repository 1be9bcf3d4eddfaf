// An exporter whose optional hook has the wrong form must not compile (xtel/core/exporter.hpp):
// built once per XTEL_WRONG_<hook> macro (with XTEL_WRONG_HOOK) by tests/cmake/compile.cmake, which
// expects the static_assert's message. Without a macro the exporter is right and the file compiles,
// which shows the failures come from the hooks and from nothing else.

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "xtel/core/exporter.hpp"

/// The metric state the snapshot sink serves (metrics::agent_metrics in the real ones).
struct checked_state {
    explicit checked_state(const xtel::exporter_context&) {}
};

/// An event sink, every optional hook in its documented form unless a macro spoils one.
struct checked_exporter {
    explicit checked_exporter(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event>) {}

#if defined(XTEL_WRONG_ON_FLUSH_END)
    void on_flush_end(int) {}
#elif defined(XTEL_WRONG_ON_STOP)
    int on_stop() {
        return 0;
    }
#elif defined(XTEL_WRONG_DISABLED)
    bool disabled() noexcept {
        return false;
    }  // not const
#elif defined(XTEL_WRONG_EVENTS_LOST)
    int events_lost() const noexcept {
        return 0;
    }
#elif defined(XTEL_WRONG_EXPORT_TRANSFERS)
    void export_transfers(std::span<const xtel::transfer_record>) {}
#elif defined(XTEL_WRONG_NAME)
    static constexpr const char* name = "checked";
#else
    static constexpr std::string_view name = "checked";
    void export_transfers(std::span<const xtel::transfer_record>, const xtel::label_table&) {}
    void on_flush_end() {}
    void on_stop() {}
    bool disabled() const noexcept {
        return false;
    }
    std::uint64_t events_lost() const noexcept {
        return 0;
    }
#endif
};

/// The span stage the snapshot sink takes spans from (trace::span_stage in the node exporter).
struct checked_stage {
    using span_type = int;
    explicit checked_stage(const xtel::exporter_context&) {}
    bool on() const noexcept { return true; }
};

/// A snapshot sink that takes spans, in its documented form unless a macro spoils it.
struct checked_snapshot_sink {
    using metric_state = checked_state;
#if defined(XTEL_WRONG_METRIC_STATE)
    // no constructor from metric_state_context
    explicit checked_snapshot_sink(const xtel::exporter_context&) {}
#else
    explicit checked_snapshot_sink(const xtel::metric_state_context<checked_state>&) {}
#endif
#if defined(XTEL_WRONG_SNAPSHOT_EXPORT_BATCH)
    void export_batch(std::span<const xtel::event>) {}  // the pipeline folds for it
#endif
#if defined(XTEL_WRONG_EXPORT_SPANS)
    void export_spans(std::span<const int>) {}  // says nothing of whether it wrote them
#else
    bool export_spans(std::span<const int>) {
        return true;
    }
#endif
    using span_stage = checked_stage;
    bool takes_spans() const noexcept {
        return true;
    }
    void on_flush_end() {}
};

template struct xtel::exporter_traits<checked_exporter>;
template struct xtel::exporter_traits<checked_snapshot_sink>;

#if !defined(XTEL_WRONG_HOOK)
static_assert(xtel::exporter_traits<checked_exporter>::wants_events);
static_assert(xtel::exporter_traits<checked_exporter>::wants_transfers);
static_assert(xtel::exporter_traits<checked_exporter>::name == "checked");
static_assert(!xtel::exporter_traits<checked_exporter>::wants_metric_state);
static_assert(!xtel::exporter_traits<checked_snapshot_sink>::wants_events);
static_assert(!xtel::exporter_traits<checked_snapshot_sink>::wants_transfers);
static_assert(xtel::exporter_traits<checked_snapshot_sink>::wants_metric_state);
static_assert(xtel::exporter_traits<checked_snapshot_sink>::wants_spans);
static_assert(!xtel::exporter_traits<checked_exporter>::wants_spans);
static_assert(
    std::is_same_v<xtel::exporter_traits<checked_snapshot_sink>::span_stage_t, checked_stage>);
static_assert(
    std::is_same_v<xtel::exporter_traits<checked_snapshot_sink>::metric_state_t, checked_state>);
#endif
