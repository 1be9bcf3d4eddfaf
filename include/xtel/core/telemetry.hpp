#pragma once
/// The telemetry pipeline: `telemetry<Exporters...>`.
///
/// Recording threads write compact records into rings that only they write (ring.hpp); a
/// flusher thread expands them into events every run interval, and once more on destruction,
/// and hands each batch to every exporter through a fold expression. There is no virtual call
/// on either path, and `telemetry<>` (disabled) compiles every record call to nothing.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "xtel/core/clock.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/event_batch.hpp"
#include "xtel/core/exporter.hpp"
#include "xtel/core/names.hpp"
#include "xtel/core/ring.hpp"
#include "xtel/core/telemetry_options.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel {

namespace detail {
/// Out of line: formats and logs an exporter's failure (the first one per exporter).
void report_export_failure(std::string_view agent,
                           std::string_view exporter_name,
                           std::string_view what,
                           std::uint64_t failures) noexcept;

/// How many events the flusher makes of one transfer for exporters that take events:
/// agent_{tx,rx}_bytes and agent_{tx,rx}_requests_num for a completed transfer, and
/// agent_xfer_time and agent_xfer_post_time besides when its times were measured; none for a
/// failed one. Counted (telemetry_stats::events_exported) even when no exporter takes them.
constexpr std::size_t events_of_transfer(transfer_status status, bool timed) noexcept {
    return status != transfer_status::success ? 0 : timed ? 4 : 2;
}

/// The first of `M...` that is not void (the metric state some exporter serves), else void.
template <class... M>
struct first_metric_state {
    using type = void;
};
template <class M, class... Rest>
struct first_metric_state<M, Rest...> {
    using type =
        std::conditional_t<std::is_void_v<M>, typename first_metric_state<Rest...>::type, M>;
};

/// What a pipeline without metric state holds in its place.
struct no_metric_state {};

}  // namespace detail

/// The exporters of a pipeline, in the order the pipeline calls them.
template <exporter... Exporters>
struct exporter_list {};

/// The pipeline over the exporters of an exporter_list; spelled `telemetry<Exporters...>`.
/// The pipeline is a class template over one list type, not over the pack itself, so that
/// xtel/exporters/pipelines.hpp can name an instantiation computed from its list of built-in
/// exporters (an alias) in `extern template` and explicit instantiation, which take no alias in
/// their own class name.
template <class ExporterList>
class basic_telemetry;

/// `telemetry<>` (disabled), `telemetry<buffer_exporter>`, ...
template <exporter... Exporters>
using telemetry = basic_telemetry<exporter_list<Exporters...>>;

template <exporter... Exporters>
class basic_telemetry<exporter_list<Exporters...>> {
  public:
    /// False for `telemetry<>`, whose record calls do nothing.
    static constexpr bool enabled = sizeof...(Exporters) > 0;
    /// Whether any exporter takes whole transfer records; when none does, none are built, and
    /// a recorder need not fill transfer attributes.
    static constexpr bool takes_transfers = (exporter_traits<Exporters>::wants_transfers || ...) ||
                                            (exporter_traits<Exporters>::wants_metric_state || ...);
    /// Whether any exporter takes events only; when none does, transfers are not expanded into
    /// events at all.
    static constexpr bool expands_transfers = (!exporter_traits<Exporters>::wants_transfers || ...);
    /// Both kinds: transfer takers get their events from a second vector, without the ones
    /// derived from transfers (they have the records).
    static constexpr bool splits_events = takes_transfers && expands_transfers;
    /// The metric state the exporters that declare `metric_state` serve (exporter.hpp), or
    /// void: the pipeline owns one and folds into it once for all of them.
    using metric_state_type = typename detail::first_metric_state<
        typename exporter_traits<Exporters>::metric_state_t...>::type;
    static constexpr bool owns_metric_state = !std::is_void_v<metric_state_type>;
    static_assert(((std::is_void_v<typename exporter_traits<Exporters>::metric_state_t> ||
                    std::is_same_v<typename exporter_traits<Exporters>::metric_state_t,
                                   metric_state_type>)&&...),
                  "every exporter that declares metric_state names the same type");

    /// Builds every exporter (their set-up errors propagate) and starts the flusher.
    basic_telemetry(const config& cfg, std::string agent_name, telemetry_options opts = {})
        : agent_name_(std::move(agent_name)),
          opts_(opts),
          interval_(cfg.run_interval),
          registry_(opts.staging_capacity, opts.start_flusher ? &early_flush_ : nullptr),
          metric_state_(make_metric_state(exporter_context{cfg, agent_name_})),
          exporters_(make_exporters(exporter_context{cfg, agent_name_},
                                    std::index_sequence_for<Exporters...>{})) {
        if constexpr (enabled) {
            batch_.reserve(opts_.batch_size + 4);
            if (opts_.start_flusher) {
                flusher_ = std::thread([this] { run_flusher(); });
            }
        }
    }

    basic_telemetry(const basic_telemetry&) = delete;
    basic_telemetry& operator=(const basic_telemetry&) = delete;

    /// Stops the flusher, then flushes what is left, so nothing recorded before is lost.
    ~basic_telemetry() {
        if constexpr (enabled) {
            {
                const std::lock_guard lock(wake_mutex_);
                stopping_ = true;
            }
            wake_.notify_all();
            if (flusher_.joinable()) {
                flusher_.join();
            }
            flush();
            std::apply(
                [](auto&... e) { (exporter_traits<std::decay_t<decltype(e)>>::on_stop(e), ...); },
                exporters_);
        }
    }

    /// Records one event stamped now.
    void record(category cat,
                const event_name& name,
                std::uint64_t value,
                value_kind kind = value_kind::sample) noexcept {
        if constexpr (enabled) {
            record_at(clock::now_us(), cat, name, value, kind);
        }
    }

    /// Records one event with a timestamp the caller already holds.
    void record_at(std::uint64_t timestamp_us,
                   category cat,
                   const event_name& name,
                   std::uint64_t value,
                   value_kind kind = value_kind::sample) noexcept {
        if constexpr (enabled) {
            stage([&](detail::staged_record& r) {
                r.timestamp_us = timestamp_us;
                r.value = value;
                r.kind = detail::record_kind::event;
                r.cat = cat;
                r.vkind = kind;
                r.continued = false;
                std::memcpy(r.payload, &name, sizeof(event_name));
            });
        }
    }

    /// Adds to a counter (the event carries the increment).
    void add(category cat, const event_name& name, std::uint64_t delta) noexcept {
        record(cat, name, delta, value_kind::counter);
    }

    /// Sets a gauge (the event carries the level).
    void set(category cat, const event_name& name, std::uint64_t value) noexcept {
        record(cat, name, value, value_kind::gauge);
    }

    /// Records a transfer as one staged record; the flusher hands it whole, with its
    /// attributes, to exporters that ask for transfers, and expands a completed one (status
    /// success) into agent_{tx,rx}_bytes, agent_{tx,rx}_requests_num, agent_xfer_time and
    /// agent_xfer_post_time. A failed one makes no such event: those count completed
    /// transfers, as in NIXL.
    /// A non-empty `request_id` (the caller's request or trace id, cut to max_request_id
    /// bytes) is staged in a second record beside it, and reaches exporters of transfer
    /// records as transfer_record::request_id: one more cache line, for tagged transfers only.
    /// PRECONDITION: `attrs` was filled before this call (say, when the transfer was created):
    /// it is copied as two 8-byte words.
    void record_transfer(direction dir,
                         std::uint64_t timestamp_us,
                         std::uint64_t bytes,
                         std::uint64_t requests,
                         std::uint64_t post_us,
                         std::uint64_t xfer_us,
                         const transfer_attributes& attrs = no_attributes,
                         std::string_view request_id = {},
                         transfer_shape shape = {}) noexcept {
        if (request_id.empty() || !takes_transfers) [[likely]] {
            stage_transfer(dir, timestamp_us, bytes, requests, post_us, xfer_us, attrs, true,
                           shape);
        } else {
            stage_tagged(dir, timestamp_us, bytes, requests, post_us, xfer_us, attrs, true,
                         request_id, shape);
        }
    }

    /// Records completed transfers whose times were not measured: their bytes and requests
    /// only. Expanded into agent_{tx,rx}_bytes and agent_{tx,rx}_requests_num, with no time
    /// events; handed to transfer exporters with `timed` false.
    /// A non-empty `request_id` is staged beside it as record_transfer's is (a failed
    /// transfer's, so that its span joins its request's trace).
    void record_transfer_counts(direction dir,
                                std::uint64_t timestamp_us,
                                std::uint64_t bytes,
                                std::uint64_t requests,
                                const transfer_attributes& attrs = no_attributes,
                                std::string_view request_id = {},
                                transfer_shape shape = {}) noexcept {
        if (request_id.empty() || !takes_transfers) [[likely]] {
            stage_transfer(dir, timestamp_us, bytes, requests, 0, 0, attrs, false, shape);
        } else {
            stage_tagged(dir, timestamp_us, bytes, requests, 0, 0, attrs, false, request_id, shape);
        }
    }

    /// Records a transfer another agent made into (or from) this agent's memory, told by its
    /// notification: `attrs.remote_agent` is the initiator. It reaches exporters of transfer
    /// records with `notified` set, one completion, not timed, and makes no event: events and
    /// the transfer families count the transfers this agent initiated. A non-empty
    /// `request_id` (the initiator's trace as a traceparent or trace id) is staged beside it.
    /// Nothing when no exporter takes transfer records. Slow path (the target's progress).
    [[gnu::noinline]] void record_notified(std::uint64_t timestamp_us,
                                           std::uint64_t bytes,
                                           const transfer_attributes& attrs,
                                           std::string_view request_id = {}) noexcept {
        if constexpr (takes_transfers) {
            // As the target sees the bytes: a write came in, a read went out.
            const direction dir = attrs.op == transfer_op::read ? direction::tx : direction::rx;
            stage_with_id(request_id, [&](detail::staged_record& r, bool continued) {
                fill_transfer(r, dir, timestamp_us, bytes, 1, 0, 0, attrs, false, continued);
                r.kind = notified_kind(dir);
            });
        }
    }

    /// How many flushes have run, timer or manual: it changes once per run interval, so a
    /// recorder can tell, with one load of a line that rarely changes, that an interval
    /// passed. Zero for `telemetry<>`.
    std::uint64_t flushes() const noexcept {
        if constexpr (enabled) {
            return flushes_.value.load(std::memory_order_relaxed);
        } else {
            return 0;
        }
    }

    /// The strings transfer attributes refer to. intern() is for slow paths only.
    label_table& labels() noexcept { return labels_; }
    const label_table& labels() const noexcept { return labels_; }

    /// Hands everything staged so far to the exporters, on the calling thread. The flusher
    /// calls it on its own; users call it to make events visible without waiting.
    void flush() {
        if constexpr (enabled) {
            const std::lock_guard lock(flush_mutex_);
            flush_locked();
        }
    }

    telemetry_stats stats() const {
        telemetry_stats s;
        s.events_exported = exported_.load(std::memory_order_relaxed);
        s.records_dropped = registry_.dropped();
        s.export_errors = export_errors_.load(std::memory_order_relaxed);
        std::apply(
            [&s](const auto&... e) {
                ((s.exporters_disabled +=
                  exporter_traits<std::decay_t<decltype(e)>>::disabled(e) ? 1 : 0),
                 ...);
                ((s.events_lost += exporter_traits<std::decay_t<decltype(e)>>::events_lost(e)),
                 ...);
            },
            exporters_);
        return s;
    }

    const std::string& agent_name() const noexcept { return agent_name_; }

    /// The agent's metric state that the exporters declaring `metric_state` serve: add a
    /// user's metrics builder to it (metric_state().add_builder). PRECONDITION: its members
    /// called are safe from this thread while the flusher runs (agent_metrics says which).
    template <class M = metric_state_type>
    requires(!std::is_void_v<M>) M& metric_state() noexcept { return *metric_state_; }

    /// The exporter of type E. PRECONDITION: E's own members are safe to call from this thread
    /// while the flusher runs (each exporter says which are).
    template <class E>
    E& get() noexcept {
        return std::get<E>(exporters_);
    }

  private:
    using exporter_tuple = std::tuple<Exporters...>;

    /// Writes a transfer's record into `r` (the body of stage_transfer's fill).
    /// The record kind of a notified transfer: its own kind, so that telling it from the
    /// agent's own transfers costs the hot path no store (fill_transfer writes the kind anyway).
    static constexpr detail::record_kind notified_kind(direction dir) noexcept {
        return dir == direction::tx ? detail::record_kind::transfer_notified_tx
                                    : detail::record_kind::transfer_notified_rx;
    }

    static void fill_transfer(detail::staged_record& r,
                              direction dir,
                              std::uint64_t timestamp_us,
                              std::uint64_t bytes,
                              std::uint64_t requests,
                              std::uint64_t post_us,
                              std::uint64_t xfer_us,
                              const transfer_attributes& attrs,
                              bool timed,
                              bool continued,
                              transfer_shape shape = {}) noexcept {
        r.timestamp_us = timestamp_us;
        r.value = bytes;
        const auto kind = dir == direction::tx ? detail::record_kind::transfer_tx
                                               : detail::record_kind::transfer_rx;
        if constexpr (std::endian::native == std::endian::little) {
            // kind, cat, vkind, timed, continued and the shape's three bytes as one 8-byte
            // store, made in a register: one store instead of five (cat and vkind are unused
            // by transfers).
            static_assert(offsetof(detail::staged_record, cat) ==
                              offsetof(detail::staged_record, kind) + 1 &&
                          offsetof(detail::staged_record, shape) ==
                              offsetof(detail::staged_record, kind) + 5);
            const std::uint64_t head = std::uint64_t{static_cast<std::uint8_t>(kind)} |
                                       std::uint64_t{timed} << 24 | std::uint64_t{continued} << 32 |
                                       std::uint64_t{shape.descriptors} << 40 |
                                       std::uint64_t{shape.lanes} << 56;
            std::memcpy(
                reinterpret_cast<unsigned char*>(&r) + offsetof(detail::staged_record, kind), &head,
                sizeof head);
        } else {
            r.kind = kind;
            r.timed = timed;
            r.continued = continued;
            r.shape[0] = static_cast<std::uint8_t>(shape.descriptors);
            r.shape[1] = static_cast<std::uint8_t>(shape.descriptors >> 8);
            r.shape[2] = shape.lanes;
        }
        // Field by field: a struct built on the stack and copied as one block costs a
        // store-forwarding stall (two 8-byte stores read back as one 16-byte load).
        std::memcpy(r.payload + offsetof(detail::transfer_fields, requests), &requests, 8);
        std::memcpy(r.payload + offsetof(detail::transfer_fields, post_us), &post_us, 8);
        std::memcpy(r.payload + offsetof(detail::transfer_fields, xfer_us), &xfer_us, 8);
        std::memcpy(r.payload + offsetof(detail::transfer_fields, attrs), &attrs, sizeof attrs);
    }

    /// A transfer and its request id: two slots, published together.
    [[gnu::noinline]] void stage_tagged(direction dir,
                                        std::uint64_t timestamp_us,
                                        std::uint64_t bytes,
                                        std::uint64_t requests,
                                        std::uint64_t post_us,
                                        std::uint64_t xfer_us,
                                        const transfer_attributes& attrs,
                                        bool timed,
                                        std::string_view request_id,
                                        transfer_shape shape) noexcept {
        if constexpr (enabled) {
            stage_with_id(request_id, [&](detail::staged_record& r, bool continued) {
                fill_transfer(r, dir, timestamp_us, bytes, requests, post_us, xfer_us, attrs, timed,
                              continued, shape);
            });
        }
    }

    /// Stages the record `fill(record, continued)` writes and, when `request_id` is not empty,
    /// the id in the slot after it (`continued` true), the two published together. Without
    /// room for two, the record alone (`continued` false), which loses only its id; without
    /// room for one, a counted drop.
    template <class Fill>
    void stage_with_id(std::string_view request_id, Fill&& fill) noexcept {
        detail::staging_ring* ring = registry_.local_ring();
        if (ring == nullptr) [[unlikely]] {
            registry_.note_unstaged_drop();
            return;
        }
        if (!request_id.empty()) {
            if (detail::staged_record* r = ring->try_claim_pair(); r != nullptr) [[likely]] {
                fill(*r, true);
                detail::tag_layout::write(*ring->second_of(r), clip_request_id(request_id));
                ring->publish_pair();
                return;
            }
        }
        detail::staged_record* r = ring->try_claim();
        if (r == nullptr) [[unlikely]] {
            ring->note_drop();
            return;
        }
        fill(*r, false);
        ring->publish();
    }

    void stage_transfer(direction dir,
                        std::uint64_t timestamp_us,
                        std::uint64_t bytes,
                        std::uint64_t requests,
                        std::uint64_t post_us,
                        std::uint64_t xfer_us,
                        const transfer_attributes& attrs,
                        bool timed,
                        transfer_shape shape) noexcept {
        if constexpr (enabled) {
            stage([&](detail::staged_record& r) {
                fill_transfer(r, dir, timestamp_us, bytes, requests, post_us, xfer_us, attrs, timed,
                              false, shape);
            });
        }
    }

    /// What a transfer recorded without attributes carries (every field "not known").
    static constexpr transfer_attributes no_attributes{};

    using metric_state_holder = std::conditional_t<owns_metric_state,
                                                   std::shared_ptr<metric_state_type>,
                                                   detail::no_metric_state>;

    static metric_state_holder make_metric_state([[maybe_unused]] const exporter_context& ctx) {
        if constexpr (owns_metric_state) {
            return std::make_shared<metric_state_type>(ctx);
        } else {
            return {};
        }
    }

    /// What exporter E is built from: the context, or the context and the pipeline's metric
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

    /// Fills the calling thread's next slot and publishes it; drops and counts when full.
    template <class Fill>
    void stage(Fill&& fill) noexcept {
        detail::staging_ring* ring = registry_.local_ring();
        if (ring == nullptr) [[unlikely]] {
            registry_.note_unstaged_drop();
            return;
        }
        detail::staged_record* r = ring->try_claim();
        if (r == nullptr) [[unlikely]] {
            ring->note_drop();
            return;
        }
        fill(*r);
        ring->publish();
    }

    void run_flusher() {
        using steady = std::chrono::steady_clock;
        std::unique_lock lock(wake_mutex_);
        auto due = steady::now() + interval_;
        while (!stopping_) {
            // A ring past half full cuts the wait short, so bursts faster than one interval's
            // worth of staging are drained instead of dropped. Its wake-up can be lost (the
            // recorder notifies without the mutex: flush_signal), and a lost one is not sent
            // again while the request stays pending, so the flag is also looked at every
            // early_flush_poll: a lost wake-up costs that much, never a whole interval.
            const auto until = std::min(due, steady::now() + early_flush_poll);
            wake_.wait_until(lock, until, [this] { return stopping_ || early_flush_.pending(); });
            if (stopping_) {
                break;
            }
            if (!early_flush_.take() && steady::now() < due) {
                continue;
            }
            lock.unlock();
            flush();
            lock.lock();
            due = steady::now() + interval_;
        }
    }

    void flush_locked() {
        registry_.snapshot(rings_);
        for (const auto& ring : rings_) {
            // Take at most one ring's worth per round, so a producer that never pauses cannot
            // keep the flusher on one ring forever.
            std::size_t budget = ring->capacity();
            while (budget > 0) {
                const std::size_t take =
                    std::min(budget, std::max<std::size_t>(opts_.batch_size / 4, 1));
                const std::size_t n =
                    ring->drain([this](const detail::staged_record& r) { expand(r); }, take);
                if (batch_.size() + unexpanded_ >= opts_.batch_size) {
                    export_batch();
                }
                if (n < take) {
                    break;
                }
                budget -= n;
            }
        }
        rings_.clear();
        const std::uint64_t dropped = registry_.dropped();
        if (dropped > dropped_reported_) {
            event e;
            e.timestamp_us = clock::now_us();
            e.value = dropped - dropped_reported_;
            e.cat = category::system;
            e.kind = value_kind::counter;
            e.name = names::telemetry_events_dropped;
            push_plain(e);
            dropped_reported_ = dropped;
        }
        export_batch();
        if constexpr (owns_metric_state || (exporter_traits<Exporters>::wants_health || ...)) {
            const std::array<exporter_health, sizeof...(Exporters)> health = std::apply(
                [](const auto&... e) {
                    return std::array<exporter_health, sizeof...(Exporters)>{exporter_health{
                        exporter_traits<std::decay_t<decltype(e)>>::name,
                        exporter_traits<std::decay_t<decltype(e)>>::disabled(e),
                        exporter_traits<std::decay_t<decltype(e)>>::events_lost(e)}...};
                },
                exporters_);
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
        flushes_.value.fetch_add(1, std::memory_order_relaxed);
    }

    /// Appends one event of a transfer to the batch, written field by field in place. Built on
    /// the stack and copied, each event cost a store-forwarding stall (its one-byte fields
    /// stored, then read back in 16-byte loads for the copy): 60% of the flusher's drain.
    void push_event(std::uint64_t ts,
                    category cat,
                    const event_name& name,
                    std::uint64_t value,
                    value_kind kind) {
        event& e = batch_.append();
        e.timestamp_us = ts;
        e.value = value;
        e.cat = cat;
        e.kind = kind;
        std::memcpy(&e.name, &name, sizeof name);
    }

    /// An event not derived from a transfer record: for every exporter.
    void push_plain(const event& e) {
        batch_.push_back(e);
        if constexpr (splits_events) {
            plain_.push_back(e);
        }
    }

    void expand(const detail::staged_record& r) {
        if (r.kind == detail::record_kind::transfer_tag) {
            // The id of the transfer record just before it (the pair is drained together).
            if constexpr (takes_transfers) {
                if (!transfers_.empty()) {
                    const std::size_t at = tag_text_.size();
                    detail::tag_layout::read(r, tag_text_);
                    tags_.push_back({transfers_.size() - 1, at, tag_text_.size() - at});
                }
            }
            return;
        }
        if (r.kind == detail::record_kind::event) {
            event e;
            e.timestamp_us = r.timestamp_us;
            e.value = r.value;
            e.cat = r.cat;
            e.kind = r.vkind;
            std::memcpy(&e.name, r.payload, sizeof(event_name));
            push_plain(e);
            return;
        }
        detail::transfer_fields f;
        std::memcpy(&f, r.payload, sizeof f);
        const bool tx = r.kind == detail::record_kind::transfer_tx ||
                        r.kind == detail::record_kind::transfer_notified_tx;
        const bool notified = r.kind == detail::record_kind::transfer_notified_tx ||
                              r.kind == detail::record_kind::transfer_notified_rx;
        if constexpr (takes_transfers) {
            transfer_record& t = transfers_.emplace_back(
                transfer_record{r.timestamp_us, r.value, f.requests, f.post_us, f.xfer_us,
                                tx ? direction::tx : direction::rx, f.attrs, r.timed});
            t.notified = notified;
            t.shape.descriptors = static_cast<std::uint16_t>(r.shape[0] | r.shape[1] << 8);
            t.shape.lanes = r.shape[2];
        }
        if (notified) {
            return;  // another agent's transfer: no agent_*_bytes event counts it here
        }
        if constexpr (!expands_transfers) {
            // Every exporter takes the record itself: its events are only counted.
            unexpanded_ += detail::events_of_transfer(f.attrs.status, r.timed);
            return;
        }
        if (f.attrs.status != transfer_status::success) {
            return;
        }
        push_event(r.timestamp_us, category::transfer,
                   tx ? names::agent_tx_bytes : names::agent_rx_bytes, r.value,
                   value_kind::counter);
        push_event(r.timestamp_us, category::transfer,
                   tx ? names::agent_tx_requests_num : names::agent_rx_requests_num, f.requests,
                   value_kind::counter);
        if (!r.timed) {
            return;
        }
        push_event(r.timestamp_us, category::performance, names::agent_xfer_time, f.xfer_us,
                   value_kind::sample);
        push_event(r.timestamp_us, category::performance, names::agent_xfer_post_time, f.post_us,
                   value_kind::sample);
    }

    /// Hands the records, then the events: each transfer reaches an exporter once, as a record
    /// when it declares export_transfers, else as the events expand() made of it.
    void export_batch() {
        if constexpr (takes_transfers) {
            if (!transfers_.empty()) {
                // The ids' text has stopped growing: views into it stay valid for the call.
                for (const auto& tag : tags_) {
                    transfers_[tag.record].request_id =
                        std::string_view(tag_text_).substr(tag.offset, tag.length);
                }
                const std::span<const transfer_record> t(transfers_.data(), transfers_.size());
                before_fold_each(t, std::index_sequence_for<Exporters...>{});
                fold_metric_state([&](auto& m) { m.apply_transfers(t, labels_); });
                export_transfers_each(t, std::index_sequence_for<Exporters...>{});
                transfers_.clear();
                tags_.clear();
                tag_text_.clear();
            }
        }
        const std::size_t made = batch_.size() + unexpanded_;
        if (made == 0) {
            return;
        }
        if constexpr (owns_metric_state) {
            // The model takes transfer records: the events not derived from them.
            const detail::event_batch& plain = splits_events ? plain_ : batch_;
            if (!plain.empty()) {
                fold_metric_state([&](auto& m) { m.apply(plain.view()); });
            }
        }
        export_each(std::index_sequence_for<Exporters...>{});
        exported_.fetch_add(made, std::memory_order_relaxed);
        batch_.clear();
        plain_.clear();
        unexpanded_ = 0;
    }

    template <std::size_t... I>
    void export_each(std::index_sequence<I...>) {
        (export_one<I>(), ...);
    }

    template <std::size_t... I>
    void export_transfers_each([[maybe_unused]] std::span<const transfer_record> t,
                               std::index_sequence<I...>) {
        (export_transfers_one<I>(t), ...);
    }

    template <std::size_t... I>
    void before_fold_each([[maybe_unused]] std::span<const transfer_record> t,
                          std::index_sequence<I...>) {
        (before_fold_one<I>(t), ...);
    }

    template <std::size_t I>
    void before_fold_one(std::span<const transfer_record> t) noexcept {
        using E = std::tuple_element_t<I, exporter_tuple>;
        try {
            exporter_traits<E>::before_fold(std::get<I>(exporters_), t, labels_);
        } catch (const std::exception& ex) {
            note_failure(exporter_traits<E>::name, ex.what(), I);
        } catch (...) {
            note_failure(exporter_traits<E>::name, "unknown exception", I);
        }
    }

    template <std::size_t I>
    void export_transfers_one(std::span<const transfer_record> t) noexcept {
        using E = std::tuple_element_t<I, exporter_tuple>;
        if constexpr (exporter_traits<E>::wants_transfers) {
            try {
                std::get<I>(exporters_).export_transfers(t, labels_);
            } catch (const std::exception& ex) {
                note_failure(exporter_traits<E>::name, ex.what(), I);
            } catch (...) {
                note_failure(exporter_traits<E>::name, "unknown exception", I);
            }
        }
    }

    template <std::size_t I>
    void export_one() noexcept {
        using E = std::tuple_element_t<I, exporter_tuple>;
        const detail::event_batch& events =
            splits_events && exporter_traits<E>::wants_transfers ? plain_ : batch_;
        if (events.empty()) {
            return;
        }
        const std::span<const event> b = events.view();
        try {
            std::get<I>(exporters_).export_batch(b);
        } catch (const std::exception& ex) {
            note_failure(exporter_traits<E>::name, ex.what(), I);
        } catch (...) {
            note_failure(exporter_traits<E>::name, "unknown exception", I);
        }
    }

    /// Runs `fold` on the metric state, when there is one; what it throws is counted and
    /// logged once as the exporters' failures are (under the name "metrics").
    template <class Fold>
    void fold_metric_state([[maybe_unused]] Fold&& fold) noexcept {
        if constexpr (owns_metric_state) {
            try {
                fold(*metric_state_);
            } catch (const std::exception& ex) {
                note_failure("metrics", ex.what(), sizeof...(Exporters));
            } catch (...) {
                note_failure("metrics", "unknown exception", sizeof...(Exporters));
            }
        }
    }

    void note_failure(std::string_view name, std::string_view what, std::size_t index) noexcept {
        export_errors_.fetch_add(1, std::memory_order_relaxed);
        detail::report_export_failure(agent_name_, name, what, ++failures_[index]);
    }

    const std::string agent_name_;
    const telemetry_options opts_;
    const std::chrono::milliseconds interval_;
    /// How often the sleeping flusher looks for an early-flush request whose wake-up was lost.
    static constexpr std::chrono::milliseconds early_flush_poll{50};
    // Declared before the registry, whose rings signal through them.
    std::mutex wake_mutex_;
    std::condition_variable wake_;
    detail::flush_signal early_flush_{wake_};
    detail::ring_registry registry_;
    label_table labels_;
    /// Before the exporters, which keep it: they go first.
    [[no_unique_address]] metric_state_holder metric_state_;
    exporter_tuple exporters_;

    // Flusher state.
    std::mutex flush_mutex_;
    detail::event_batch batch_;  ///< every event, those derived from transfers included
    detail::event_batch plain_;  ///< splits_events only: the events not derived from transfers
    std::vector<transfer_record> transfers_;
    /// Request ids of transfers_ (by index), their text in tag_text_.
    struct tag_span {
        std::size_t record;
        std::size_t offset;
        std::size_t length;
    };
    std::vector<tag_span> tags_;
    std::string tag_text_;
    std::size_t unexpanded_ = 0;  ///< events of transfers that no exporter takes as events
    std::vector<std::shared_ptr<detail::staging_ring>> rings_;
    std::uint64_t dropped_reported_ = 0;
    std::uint64_t failures_[sizeof...(Exporters) + 1] = {};
    std::atomic<std::uint64_t> exported_{0};
    std::atomic<std::uint64_t> export_errors_{0};
    /// On a line of its own: recorders read it on every transfer, the flusher writes it once
    /// per flush.
    struct alignas(detail::cache_line) padded_counter {
        std::atomic<std::uint64_t> value{0};
    };
    padded_counter flushes_;

    bool stopping_ = false;
    std::thread flusher_;
};

}  // namespace xtel
