#pragma once
/// The back end of a pipeline: what its flusher thread runs, in one round, stage by stage:
///
///   drain    every recording thread's ring (front_end.hpp), slot by slot (slot_codec.hpp)
///   expand   each staged record into what the exporters consume, and only that: whole
///            transfer records for the model and the exporters that take them, events for the
///            exporters that take events only
///   spans    the round's transfers through the span stage, when some sink takes spans
///            (exporter.hpp, `span_stage`) and spans are configured: the sampling decision and
///            the span ids, and the spans handed to the sinks that take them. Before the fold,
///            because the latency exemplars carry the ids of the spans written
///   fold     the round's transfers (with their traces), other events, the span counts and
///            exporter health into the one metric model, when some exporter serves it
///            (exporter.hpp, `metric_state`)
///   publish  the model's snapshot
///   sinks    each exporter's hooks, in the list's order: an event sink is handed the
///            round's events (export_batch, export_transfers); a snapshot sink serves what was
///            published (on_flush_end), and the events it would lose while disabled are
///            counted here, as that sink's events_lost
///
/// A producer that has no ring (a host library with a flush thread of its own) feeds a round
/// with take() instead of drain(): events and records, as the stages after expand take them, or
/// tallies (transfer_tally), folded at once. Not thread-safe: one round at a time.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "xtel/core/back_end_detail.hpp"
#include "xtel/core/cache_line.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/event_batch.hpp"
#include "xtel/core/exporter.hpp"
#include "xtel/core/names.hpp"
#include "xtel/core/ring.hpp"
#include "xtel/core/round.hpp"
#include "xtel/core/slot_codec.hpp"
#include "xtel/core/telemetry_options.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel {

template <exporter... Exporters>
class back_end {
  public:
    /// Whether any exporter takes whole transfer records; when none does, none are built, and
    /// the front end stages no request id.
    static constexpr bool takes_transfers =
        (exporter_traits<Exporters>::wants_transfers || ...) ||
        (exporter_traits<Exporters>::wants_metric_state || ...) ||
        (exporter_traits<Exporters>::wants_spans || ...);
    /// Whether any exporter takes events only (an event sink without export_transfers); when
    /// none does, transfers are not expanded into events at all.
    static constexpr bool expands_transfers = ((exporter_traits<Exporters>::wants_events &&
                                                !exporter_traits<Exporters>::wants_transfers) ||
                                               ...);
    /// Both kinds: transfer takers get their events from a second batch, without the ones
    /// derived from transfers (they have the records).
    static constexpr bool splits_events = takes_transfers && expands_transfers;
    /// The metric model the exporters that declare `metric_state` serve (exporter.hpp), or
    /// void: the back end owns one and folds into it once for all of them.
    using metric_state_type = typename detail::first_declared<
        typename exporter_traits<Exporters>::metric_state_t...>::type;
    static constexpr bool owns_metric_state = !std::is_void_v<metric_state_type>;
    /// Whether it takes transfer_tally: only when no sink takes events or records of transfers.
    static constexpr bool takes_tallies = owns_metric_state && !expands_transfers &&
                                          !(exporter_traits<Exporters>::wants_transfers || ...);
    static_assert(((std::is_void_v<typename exporter_traits<Exporters>::metric_state_t> ||
                    std::is_same_v<typename exporter_traits<Exporters>::metric_state_t,
                                   metric_state_type>)&&...),
                  "every exporter that declares metric_state names the same type");
    /// The span stage the sinks declaring `span_stage` take spans from (exporter.hpp), or void.
    using span_stage_type =
        typename detail::first_declared<typename exporter_traits<Exporters>::span_stage_t...>::type;
    static constexpr bool owns_span_stage = !std::is_void_v<span_stage_type>;
    static_assert(
        ((std::is_void_v<typename exporter_traits<Exporters>::span_stage_t> ||
          std::is_same_v<typename exporter_traits<Exporters>::span_stage_t, span_stage_type>)&&...),
        "every exporter that declares span_stage names the same type");

    /// Builds the model and every exporter (their set-up errors propagate). `labels` are the
    /// strings transfer attributes refer to; they must outlive the back end. At most
    /// `batch_size` events are handed to an exporter in one call.
    back_end(const exporter_context& ctx, const label_table& labels, std::size_t batch_size)
        : agent_name_(ctx.agent_name),
          batch_size_(batch_size),
          labels_(labels),
          metric_state_(make_metric_state(ctx)),
          exporters_(make_exporters(ctx, std::index_sequence_for<Exporters...>{})),
          span_stage_(make_span_stage(ctx)) {
        if constexpr (sizeof...(Exporters) > 0) {
            round_.reserve(batch_size_ + 4);
        }
    }

    back_end(const back_end&) = delete;
    back_end& operator=(const back_end&) = delete;

    /// Drains every ring of `rings` into this round: expands its records, and hands a full
    /// batch on whenever one fills.
    void drain(detail::ring_registry& rings) {
        rings.snapshot(rings_);
        for (const auto& ring : rings_) {
            // Take at most one ring's worth per round, so a producer that never pauses cannot
            // keep the flusher on one ring forever.
            std::size_t budget = ring->capacity();
            while (budget > 0) {
                const std::size_t take =
                    std::min(budget, std::max<std::size_t>(batch_size_ / 4, 1));
                detail::staging_ring& from = *ring;
                const std::size_t n = from.drain(
                    [this, &from](const detail::staged_record& r) { round_.take_slot(r, from); },
                    take);
                round_.end_drain();
                if (round_.events_made() >= batch_size_) {
                    export_batch();
                }
                if (n < take) {
                    break;
                }
                budget -= n;
            }
        }
        rings_.clear();
    }

    /// Events from a producer without a ring, into this round, for every exporter as a
    /// drained event is.
    void take(std::span<const event> events) {
        for (const event& e : events) {
            round_.push_plain(e);
            if (round_.events_made() >= batch_size_) {
                export_batch();
            }
        }
    }

    /// Whole transfers from a producer without a ring, into this round, as drained transfers
    /// are: records for the model and the exporters that take them, events for the others.
    /// Each request_id is copied.
    void take(std::span<const transfer_record> records) {
        for (const transfer_record& r : records) {
            round_.take(r);
            if (round_.events_made() >= batch_size_) {
                export_batch();
            }
        }
    }

    /// Summed transfers into the model at once (takes_tallies), counted as their records' events.
    template <bool Takes = takes_tallies>  // a template: telemetry::submit says why
    requires Takes void take(std::span<const transfer_tally> tallies) {
        constexpr auto timed = detail::events_of_transfer(transfer_status::success, true);
        constexpr auto untimed = detail::events_of_transfer(transfer_status::success, false);
        std::size_t events = 0;
        for (const transfer_tally& t : tallies) {
            events += static_cast<std::size_t>(t.timed * timed + (t.transfers - t.timed) * untimed);
        }
        fold_metric_state([&](auto& m) { m.apply_tallies(tallies, labels_); });
        lose_if_disabled(events, std::index_sequence_for<Exporters...>{});
        exported_.fetch_add(events, std::memory_order_relaxed);
    }

    /// Ends the round: the records dropped since the last round (`dropped`, the total so far)
    /// as one telemetry_events_dropped event, what is left handed on, the health rows folded,
    /// the model published, and every exporter's on_flush_end.
    void end_round(std::uint64_t dropped) {
        if (dropped > dropped_reported_) {
            event e;
            e.timestamp_us = clock::now_us();
            e.value = dropped - dropped_reported_;
            e.cat = category::system;
            e.kind = value_kind::counter;
            e.name = names::telemetry_events_dropped;
            round_.push_plain(e);
            dropped_reported_ = dropped;
        }
        export_batch();
        if constexpr (owns_metric_state || (exporter_traits<Exporters>::wants_health || ...)) {
            std::array<exporter_health, sizeof...(Exporters)> health = std::apply(
                [](const auto&... e) {
                    return std::array<exporter_health, sizeof...(Exporters)>{exporter_health{
                        exporter_traits<std::decay_t<decltype(e)>>::name,
                        exporter_traits<std::decay_t<decltype(e)>>::disabled(e), 0}...};
                },
                exporters_);
            for (std::size_t i = 0; i < health.size(); ++i) {
                health[i].events_lost = events_lost(i);
            }
            fold_metric_state([&](auto& m) { m.apply_health(health); });
            std::apply(
                [&health](auto&... e) {
                    (exporter_traits<std::decay_t<decltype(e)>>::on_health(e, health), ...);
                },
                exporters_);
        }
        fold_metric_state([](auto& m) { m.publish(); });
        std::apply(
            [](auto&... e) { (exporter_traits<std::decay_t<decltype(e)>>::on_flush_end(e), ...); },
            exporters_);
        rounds_.value.fetch_add(1, std::memory_order_relaxed);
    }

    /// Once, after the last round: every exporter's on_stop.
    void stop() {
        std::apply(
            [](auto&... e) { (exporter_traits<std::decay_t<decltype(e)>>::on_stop(e), ...); },
            exporters_);
    }

    /// Rounds ended so far. On a line of its own: recorders may read it on every transfer.
    std::uint64_t rounds() const noexcept { return rounds_.value.load(std::memory_order_relaxed); }

    /// The back end's share of telemetry_stats (all but records_dropped, the front end's).
    telemetry_stats stats() const {
        telemetry_stats s;
        s.events_exported = exported_.load(std::memory_order_relaxed);
        s.export_errors = export_errors_.load(std::memory_order_relaxed);
        std::apply(
            [&s](const auto&... e) {
                ((s.exporters_disabled +=
                  exporter_traits<std::decay_t<decltype(e)>>::disabled(e) ? 1 : 0),
                 ...);
            },
            exporters_);
        for (std::size_t i = 0; i < sizeof...(Exporters); ++i) {
            s.events_lost += events_lost(i);
        }
        return s;
    }

    /// The events exporter `index` (in the list's order) lost: what an event sink says it lost,
    /// or what the back end folded while a snapshot sink was disabled (every event of those
    /// batches, as an event sink would have been handed them). Safe from any thread.
    std::uint64_t events_lost(std::size_t index) const noexcept {
        std::uint64_t n = 0;
        std::size_t i = 0;
        std::apply(
            [&](const auto&... e) {
                ((n +=
                  i++ == index ? exporter_traits<std::decay_t<decltype(e)>>::events_lost(e) : 0),
                 ...);
            },
            exporters_);
        return n + sink_lost_[index].load(std::memory_order_relaxed);
    }

    /// The metric model the exporters declaring `metric_state` serve.
    template <class M = metric_state_type>
    requires(!std::is_void_v<M>) M& metric_state() noexcept { return *metric_state_; }

    /// The exporter of type E.
    template <class E>
    E& get() noexcept {
        return std::get<E>(exporters_);
    }

  private:
    using exporter_tuple = std::tuple<Exporters...>;
    using metric_state_holder = std::
        conditional_t<owns_metric_state, std::shared_ptr<metric_state_type>, detail::none_declared>;
    using span_stage_holder = std::
        conditional_t<owns_span_stage, std::unique_ptr<span_stage_type>, detail::none_declared>;

    /// The stage, when spans are configured and some sink declares one and takes spans at
    /// start (an agent whose span ring could not be made samples nothing).
    span_stage_holder make_span_stage([[maybe_unused]] const exporter_context& ctx) const {
        if constexpr (owns_span_stage) {
            if (!some_sink_takes_spans()) {
                return nullptr;
            }
            auto stage = std::make_unique<span_stage_type>(ctx);
            return stage->on() ? std::move(stage) : nullptr;
        } else {
            return {};
        }
    }

    bool some_sink_takes_spans() const noexcept {
        return std::apply(
            [](const auto&... e) {
                return (exporter_traits<std::decay_t<decltype(e)>>::takes_spans(e) || ...);
            },
            exporters_);
    }

    static metric_state_holder make_metric_state([[maybe_unused]] const exporter_context& ctx) {
        if constexpr (owns_metric_state) {
            return std::make_shared<metric_state_type>(ctx);
        } else {
            return {};
        }
    }

    /// What exporter E is built from: the context, or the context and the back end's metric
    /// state when E serves it.
    template <class E>
    decltype(auto) exporter_argument(const exporter_context& ctx) const {
        if constexpr (exporter_traits<E>::wants_metric_state) {
            return metric_state_context<metric_state_type>{ctx, metric_state_};
        } else {
            return ctx;
        }
    }

    exporter_tuple make_exporters(const exporter_context& ctx,
                                  std::index_sequence_for<Exporters...>) const {
        return exporter_tuple{exporter_argument<Exporters>(ctx)...};
    }

    /// Hands the records, then the events: each transfer reaches an exporter once, as a record
    /// when it declares export_transfers, else as the events expand made of it.
    void export_batch() {
        if constexpr (takes_transfers) {
            const std::span<const transfer_record> t = round_.transfers();
            if (!t.empty()) {
                const std::span<const transfer_trace> traces = run_span_stage(t);
                fold_metric_state([&](auto& m) {
                    if constexpr (owns_span_stage) {
                        m.apply_transfers(t, labels_, traces);
                    } else {
                        m.apply_transfers(t, labels_);
                    }
                });
                export_transfers_each(t, std::index_sequence_for<Exporters...>{});
                round_.clear_transfers();
            }
        }
        const std::size_t made = round_.events_made();
        if (made == 0) {
            return;
        }
        if constexpr (owns_metric_state) {
            // The model takes transfer records: the events not derived from them.
            if (!round_.plain().empty()) {
                fold_metric_state([&](auto& m) { m.apply(round_.plain().view()); });
            }
        }
        export_each(std::index_sequence_for<Exporters...>{});
        exported_.fetch_add(made, std::memory_order_relaxed);
        round_.clear_events();
    }

    template <std::size_t I>
    using exporter_at = std::tuple_element_t<I, exporter_tuple>;

    /// The span stage on the round's transfers, when some sink takes spans now: the spans
    /// sampled, handed to each sink that takes them, their counts folded; returns the traces
    /// the fold's exemplars carry (none without the stage).
    std::span<const transfer_trace> run_span_stage(
        [[maybe_unused]] std::span<const transfer_record> t) noexcept {
        if constexpr (owns_span_stage) {
            if (!span_stage_ || !some_sink_takes_spans()) {
                return {};
            }
            span_stage_->sample(t, labels_, clock::now_us());
            if (!span_stage_->spans().empty()) {
                span_stage_->taken(export_spans_each(std::index_sequence_for<Exporters...>{}));
            }
            fold_metric_state([&](auto& m) { m.apply_spans(span_stage_->totals()); });
            return span_stage_->traces();
        } else {
            return {};
        }
    }

    /// Whether some sink wrote the stage's spans.
    template <std::size_t... I>
    bool export_spans_each(std::index_sequence<I...>) noexcept {
        bool written = false;
        ((written = export_spans_one<I>() || written), ...);
        return written;
    }

    template <std::size_t I>
    bool export_spans_one() noexcept {
        bool written = false;
        if constexpr (exporter_traits<exporter_at<I>>::wants_spans) {
            auto& e = std::get<I>(exporters_);
            if (e.takes_spans()) {
                guarded<I>(exporter_traits<exporter_at<I>>::name,
                           [&] { written = e.export_spans(span_stage_->spans()); });
            }
        }
        return written;
    }

    template <std::size_t... I>
    void export_transfers_each([[maybe_unused]] std::span<const transfer_record> t,
                               std::index_sequence<I...>) {
        (export_transfers_one<I>(t), ...);
    }

    template <std::size_t I>
    void export_transfers_one(std::span<const transfer_record> t) noexcept {
        if constexpr (exporter_traits<exporter_at<I>>::wants_transfers) {
            guarded<I>(exporter_traits<exporter_at<I>>::name,
                       [&] { std::get<I>(exporters_).export_transfers(t, labels_); });
        }
    }

    template <std::size_t... I>
    void export_each(std::index_sequence<I...>) {
        (export_one<I>(), ...);
    }

    /// Hands an event sink its events; for a snapshot sink that is disabled, counts the
    /// events of the batch as lost: the plain ones and those of the transfers (each one's
    /// events_of_transfer, none for a notified one), which is what events_made() counts.
    template <std::size_t I>
    void export_one() noexcept {
        if constexpr (exporter_traits<exporter_at<I>>::wants_events) {
            const detail::event_batch& events =
                exporter_traits<exporter_at<I>>::wants_transfers ? round_.plain() : round_.events();
            if (!events.empty()) {
                guarded<I>(exporter_traits<exporter_at<I>>::name,
                           [&] { std::get<I>(exporters_).export_batch(events.view()); });
            }
        } else {
            lose_if_disabled(round_.events_made(), std::index_sequence<I>{});
        }
    }

    /// Counts `events` as lost by each snapshot sink of I... that is disabled now.
    template <std::size_t... I>
    void lose_if_disabled(std::size_t events, std::index_sequence<I...>) noexcept {
        ((!exporter_traits<exporter_at<I>>::wants_events &&
                  exporter_traits<exporter_at<I>>::disabled(std::get<I>(exporters_))
              ? void(sink_lost_[I].fetch_add(events, std::memory_order_relaxed))
              : void()),
         ...);
    }

    /// Runs `fold` on the metric model, when there is one (failures counted under the name
    /// "metrics").
    template <class Fold>
    void fold_metric_state([[maybe_unused]] Fold&& fold) noexcept {
        if constexpr (owns_metric_state) {
            guarded<sizeof...(Exporters)>("metrics", [&] { fold(*metric_state_); });
        }
    }

    /// Runs one hook of exporter I (I = sizeof...(Exporters): the model). What it throws is
    /// counted and logged once per exporter, and the round goes on: an exporter's failure never
    /// reaches a transfer.
    template <std::size_t I, class Call>
    void guarded(std::string_view name, Call&& call) noexcept {
        try {
            call();
        } catch (const std::exception& ex) {
            note_failure(name, ex.what(), I);
        } catch (...) {
            note_failure(name, "unknown exception", I);
        }
    }

    void note_failure(std::string_view name, std::string_view what, std::size_t index) noexcept {
        export_errors_.fetch_add(1, std::memory_order_relaxed);
        detail::report_export_failure(agent_name_, name, what, ++failures_[index]);
    }

    const std::string agent_name_;
    const std::size_t batch_size_;
    const label_table& labels_;
    /// Before the exporters, which keep it: they go first.
    [[no_unique_address]] metric_state_holder metric_state_;
    exporter_tuple exporters_;
    /// After the exporters: built once they say whether some takes spans.
    [[no_unique_address]] span_stage_holder span_stage_;

    detail::round<takes_transfers, expands_transfers> round_;
    std::vector<std::shared_ptr<detail::staging_ring>> rings_;
    std::uint64_t dropped_reported_ = 0;
    std::uint64_t failures_[sizeof...(Exporters) + 1] = {};
    /// Events lost by each snapshot sink while disabled (export_one).
    std::atomic<std::uint64_t> sink_lost_[sizeof...(Exporters) + 1] = {};
    std::atomic<std::uint64_t> exported_{0};
    std::atomic<std::uint64_t> export_errors_{0};
    /// On a line of its own: recorders read it on every transfer, the flusher writes it once
    /// per round.
    struct alignas(detail::cache_line) padded_counter {
        std::atomic<std::uint64_t> value{0};
    };
    padded_counter rounds_;
};

}  // namespace xtel
