#pragma once
/// The exporter policy contract: what a sink of a pipeline may declare.
///
/// An exporter is a type E that the pipeline owns one instance of, constructs once and calls
/// only from its flusher thread (never concurrently with itself). It is one of two kinds of
/// sink, told apart by whether it declares `using metric_state = M;`:
///
/// An event sink takes the round's events (the buffer, flight recorder and plugin exporters):
///   PRECONDITION: E is constructible from `const exporter_context&`; the constructor may throw
///                 (set-up errors, derived from xtel::error).
///   PRECONDITION: `e.export_batch(std::span<const event>)` takes a batch of events in the order
///                 each thread recorded them. It may throw; the pipeline counts, logs once and
///                 goes on, so an exporter failure never reaches a transfer.
///   OPTIONAL:     `void export_transfers(std::span<const transfer_record>, const label_table&)`:
///                 whole transfers with their attributes (before the events of the same
///                 batch). Only when some exporter declares it does the flusher build them.
///                 Each transfer reaches an exporter once: one that declares it gets in
///                 export_batch only the events not derived from transfers (no agent_tx_bytes,
///                 agent_xfer_time...); the others get every event, as without it.
///
/// A snapshot sink takes the published model (the Prometheus and node exporters):
///   PRECONDITION: E declares `using metric_state = M;` and is constructible from
///                 `const metric_state_context<M>&` only, which hands it the pipeline's one M.
///                 Every sink that declares metric_state names the same M; M is constructible
///                 from `const exporter_context&` and has `apply(std::span<const event>)`,
///                 `apply_transfers(std::span<const transfer_record>, const label_table&)`,
///                 `apply_health(std::span<const exporter_health>)` and `publish()`. The
///                 pipeline owns that one M and, on the flusher thread, folds each round's
///                 transfers (each once), the other events and the health rows into it, then
///                 publishes it before any on_flush_end: a snapshot sink serves or writes what
///                 was published, in on_flush_end, and never folds. It declares neither
///                 export_batch nor export_transfers (a compile error says so): the events it
///                 would have been handed while disabled() are counted by the pipeline, as the
///                 events lost it reports for that sink (health rows, stats()).
///
/// Either kind may also take spans (the node exporter does):
///   OPTIONAL:     `using span_stage = S;`: the pipeline's span stage (trace::span_stage; core
///                 names no trace type), which the pipeline owns, one for every sink that
///                 declares it (all name the same S), built from `const exporter_context&`.
///                 S has `using span_type`, `bool on() const noexcept` (spans configured:
///                 else the pipeline keeps no stage), `sample(std::span<const
///                 transfer_record>, const label_table&, std::uint64_t now_us)`, `spans()`,
///                 `taken(bool)`, `traces()` and `totals()`. Each round, before the fold, when some
///                 such sink takes_spans(), the stage samples the transfers and builds their spans,
///                 hands them to each sink that takes them, and the fold's exemplars carry the ids
///                 of the spans some sink wrote. With it, both of: `bool takes_spans() const
///                 noexcept`: whether it can take spans now (false: no spans configured, or nowhere
///                 to write them); and `bool export_spans(std::span<const typename S::span_type>)`:
///                 writes them; false when it could not (counted as dropped by the stage).
///
/// Either kind:
///   OPTIONAL:     `void on_flush_end()`: after each flush round (say, to publish a snapshot).
///   OPTIONAL:     `void on_health(std::span<const exporter_health>)`: after each flush round,
///                 before on_flush_end: one row per exporter of the pipeline (itself included),
///                 whether it turned itself off and the events it lost, for an exporter that
///                 shows its pipeline's health.
///   OPTIONAL:     `void on_stop()`: once, after the last batch, before destruction.
///   OPTIONAL:     `static constexpr std::string_view name`: used in log messages.
///   OPTIONAL:     `bool disabled() const noexcept`: true once the exporter has turned itself
///                 off because it cannot write (a file it cannot create, a port that is taken).
///                 It logs one error when it does; the pipeline goes on with the others.
///   OPTIONAL:     `std::uint64_t events_lost() const noexcept`: events it was handed and could
///                 not write (an event sink's; the pipeline counts a snapshot sink's). Both are
///                 read from any thread (stats()) while the flusher runs.
///
/// A hook declared in the wrong form is a compile error naming the hook (exporter_traits).

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "xtel/core/config.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel {

/// What an exporter is built from.
struct exporter_context {
    const config& cfg;
    std::string agent_name;
};

/// One exporter's health, as on_health hands it.
struct exporter_health {
    std::string_view name;
    bool disabled = false;
    std::uint64_t events_lost = 0;
};

/// What an exporter that declares `using metric_state = M;` is built from: the pipeline's
/// context and its one M, which the pipeline folds and the exporter serves.
template <class M>
struct metric_state_context {
    const exporter_context& ctx;
    std::shared_ptr<M> state;
};

/// A sink of events: built from the context, handed each batch.
template <class E>
concept event_sink = std::constructible_from<E, const exporter_context&> &&
    requires(E& e, std::span<const event> batch) {
    e.export_batch(batch);
};

/// A sink of the published model: it declares the model it serves (exporter_traits checks the
/// rest of its form, so that a wrong one is an error that names it).
template <class E>
concept snapshot_sink = requires {
    typename E::metric_state;
};

template <class E>
concept exporter = event_sink<E> || snapshot_sink<E>;

namespace detail {
template <class E, bool Declared>
struct metric_state_of {
    using type = void;
};
template <class E>
struct metric_state_of<E, true> {
    using type = typename E::metric_state;
};
template <class E, bool Declared>
struct span_stage_of {
    using type = void;
};
template <class E>
struct span_stage_of<E, true> {
    using type = typename E::span_stage;
};
}  // namespace detail

/// Fills defaults for an exporter's optional members.
///
/// An optional hook is detected by its name alone (`&E::hook`), then its form is checked: a
/// hook with the wrong signature (`void on_flush_end(int)`, a non-const `disabled()`) is a
/// compile error naming the hook and the form expected, never a silent no-op. A hook that is
/// overloaded cannot have its address taken, so it is detected only by its documented form.
template <exporter E>
struct exporter_traits {
  private:
    static constexpr bool declares_export_transfers = requires { &E::export_transfers; };
    static constexpr bool declares_on_flush_end = requires { &E::on_flush_end; };
    static constexpr bool declares_span_stage = requires { typename E::span_stage; };
    static constexpr bool declares_on_stop = requires { &E::on_stop; };
    static constexpr bool declares_on_health = requires { &E::on_health; };
    static constexpr bool declares_disabled = requires { &E::disabled; };
    static constexpr bool declares_events_lost = requires { &E::events_lost; };
    static constexpr bool declares_name = requires { &E::name; };
    static constexpr bool declares_metric_state = requires { typename E::metric_state; };
    static constexpr bool declares_export_batch = requires { &E::export_batch; };

    static constexpr bool export_transfers_ok =
        requires(E & e, std::span<const transfer_record> t, const label_table& l) {
        { e.export_transfers(t, l) } -> std::same_as<void>;
    };
    static constexpr bool span_stage_ok = [] {
        if constexpr (requires { typename E::span_stage::span_type; }) {
            using S = typename E::span_stage;
            return std::constructible_from<S, const exporter_context&> && requires(const S& stage) {
                { stage.on() }
                noexcept->std::same_as<bool>;
            }
            &&requires(E & e, const E& ce, std::span<const typename S::span_type> spans) {
                { e.export_spans(spans) } -> std::same_as<bool>;
                { ce.takes_spans() }
                noexcept->std::same_as<bool>;
            };
        } else {
            return false;
        }
    }();
    static constexpr bool on_flush_end_ok = requires(E & e) {
        { e.on_flush_end() } -> std::same_as<void>;
    };
    static constexpr bool on_health_ok = requires(E & e, std::span<const exporter_health> h) {
        { e.on_health(h) } -> std::same_as<void>;
    };
    static constexpr bool on_stop_ok = requires(E & e) {
        { e.on_stop() } -> std::same_as<void>;
    };
    static constexpr bool disabled_ok = requires(const E& e) {
        { e.disabled() }
        noexcept->std::same_as<bool>;
    };
    static constexpr bool events_lost_ok = requires(const E& e) {
        { e.events_lost() }
        noexcept->std::same_as<std::uint64_t>;
    };
    static constexpr bool metric_state_ok = [] {
        if constexpr (requires { typename E::metric_state; }) {
            return std::constructible_from<E,
                                           const metric_state_context<typename E::metric_state>&> &&
                   !std::constructible_from<E, const exporter_context&>;
        } else {
            return false;
        }
    }();
    static constexpr bool name_ok = [] {
        if constexpr (requires { E::name; }) {
            return std::same_as<decltype(E::name), const std::string_view>;
        } else {
            return false;
        }
    }();

    static_assert(!declares_export_transfers || export_transfers_ok,
                  "exporter hook export_transfers must be callable as `void "
                  "export_transfers(std::span<const transfer_record>, const label_table&)`");
    static_assert(!declares_span_stage || span_stage_ok,
                  "exporter declaring `using span_stage = S;` must have `bool export_spans(std::"
                  "span<const S::span_type>)` and `bool takes_spans() const noexcept`, and S must "
                  "be constructible from `const exporter_context&` and have `bool on() const "
                  "noexcept`");
    static_assert(!declares_on_flush_end || on_flush_end_ok,
                  "exporter hook on_flush_end must be callable as `void on_flush_end()`");
    static_assert(!declares_on_health || on_health_ok,
                  "exporter hook on_health must be callable as "
                  "`void on_health(std::span<const exporter_health>)`");
    static_assert(!declares_on_stop || on_stop_ok,
                  "exporter hook on_stop must be callable as `void on_stop()`");
    static_assert(!declares_disabled || disabled_ok,
                  "exporter hook disabled must be `bool disabled() const noexcept`");
    static_assert(!declares_events_lost || events_lost_ok,
                  "exporter hook events_lost must be `std::uint64_t events_lost() const noexcept`");
    static_assert(!declares_metric_state || metric_state_ok,
                  "exporter declaring `using metric_state = M;` must be constructible from "
                  "`const metric_state_context<M>&` and not from `const exporter_context&`");
    static_assert(!declares_metric_state || (!declares_export_batch && !declares_export_transfers),
                  "exporter declaring `using metric_state = M;` takes the published model: it "
                  "must declare neither export_batch nor export_transfers (the pipeline folds "
                  "the events and counts those lost while it is disabled)");
    static_assert(!declares_name || name_ok,
                  "exporter member name must be `static constexpr std::string_view name`");

  public:
    /// Whether it takes events (export_batch); else it takes the published model.
    static constexpr bool wants_events = !declares_metric_state;
    static constexpr bool wants_transfers = export_transfers_ok;
    static constexpr bool wants_health = on_health_ok;
    /// Whether it serves the pipeline's metric model (metric_state_t its type).
    static constexpr bool wants_metric_state = metric_state_ok;

    static constexpr std::string_view name = [] {
        if constexpr (name_ok) {
            return E::name;
        } else {
            return std::string_view{"exporter"};
        }
    }();

    /// Whether it takes spans (span_stage_t the stage's type).
    static constexpr bool wants_spans = span_stage_ok;

    /// E::metric_state when it serves the metric model, else void.
    using metric_state_t = typename detail::metric_state_of<E, metric_state_ok>::type;
    /// E::span_stage when it takes spans, else void.
    using span_stage_t = typename detail::span_stage_of<E, span_stage_ok>::type;

    static bool takes_spans(const E& e) noexcept {
        if constexpr (span_stage_ok) {
            return e.takes_spans();
        } else {
            return false;
        }
    }

    static void on_flush_end(E& e) {
        if constexpr (on_flush_end_ok) {
            e.on_flush_end();
        }
    }

    static void on_health(E& e, std::span<const exporter_health> rows) {
        if constexpr (on_health_ok) {
            e.on_health(rows);
        }
    }

    static bool disabled(const E& e) noexcept {
        if constexpr (disabled_ok) {
            return e.disabled();
        } else {
            return false;
        }
    }

    static std::uint64_t events_lost(const E& e) noexcept {
        if constexpr (events_lost_ok) {
            return e.events_lost();
        } else {
            return 0;
        }
    }

    static void on_stop(E& e) {
        if constexpr (on_stop_ok) {
            e.on_stop();
        }
    }
};

}  // namespace xtel
