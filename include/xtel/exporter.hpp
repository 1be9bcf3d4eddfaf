#pragma once
/// The exporter policy contract.
///
/// An exporter is a type E that the pipeline owns one instance of, constructs once and calls
/// only from its flusher thread (never concurrently with itself):
///
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
///   OPTIONAL:     `void on_flush_end()`: after each flush round (say, to publish a snapshot).
///   OPTIONAL:     `void on_stop()`: once, after the last batch, before destruction.
///   OPTIONAL:     `static constexpr std::string_view name`: used in log messages.
///   OPTIONAL:     `bool disabled() const noexcept`: true once the exporter has turned itself
///                 off because it cannot write (a file it cannot create, a port that is taken).
///                 It logs one error when it does; the pipeline goes on with the others.
///   OPTIONAL:     `std::uint64_t events_lost() const noexcept`: events it was handed and could
///                 not write. Both are read from any thread (stats()) while the flusher runs.

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "xtel/config.hpp"
#include "xtel/event.hpp"
#include "xtel/transfer_record.hpp"

namespace xtel {

/// What an exporter is built from.
struct exporter_context {
    const config& cfg;
    std::string agent_name;
};

template <class E>
concept exporter = std::constructible_from<E, const exporter_context&> &&
    requires(E& e, std::span<const event> batch) {
    e.export_batch(batch);
};

/// Fills defaults for an exporter's optional members.
template <exporter E>
struct exporter_traits {
    static constexpr bool wants_transfers =
        requires(E & e, std::span<const transfer_record> t, const label_table& l) {
        e.export_transfers(t, l);
    };

    static constexpr std::string_view name = [] {
        if constexpr (requires { E::name; }) {
            return std::string_view{E::name};
        } else {
            return std::string_view{"exporter"};
        }
    }();

    static void on_flush_end(E& e) {
        if constexpr (requires { e.on_flush_end(); }) {
            e.on_flush_end();
        }
    }

    static bool disabled(const E& e) noexcept {
        if constexpr (requires { e.disabled(); }) {
            return e.disabled();
        } else {
            return false;
        }
    }

    static std::uint64_t events_lost(const E& e) noexcept {
        if constexpr (requires { e.events_lost(); }) {
            return e.events_lost();
        } else {
            return 0;
        }
    }

    static void on_stop(E& e) {
        if constexpr (requires { e.on_stop(); }) {
            e.on_stop();
        }
    }
};

}  // namespace xtel
