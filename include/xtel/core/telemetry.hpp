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
            detail::staging_ring* ring = registry_.local_ring();
            if (ring == nullptr) [[unlikely]] {
                return;  // counted by local_ring
            }
            detail::staged_record* r = ring->try_claim_n(2);
            if (r == nullptr) [[unlikely]] {
                ring->note_drop();
                return;
            }
            detail::event_layout::write(*r, *ring->next_of(r), timestamp_us, value, cat, kind,
                                        name);
            ring->publish_n(2);
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
    /// records as transfer_record::request_id: two more slots, for tagged transfers only.
    /// The record is one 32-byte slot when `attrs` are among the 16 attribute sets this thread
    /// used last (a cache by hash: an agent's transfers share a few) and `requests` fits 16
    /// bits; two slots otherwise. post_us and xfer_us are kept to 2^32 - 1 (71.6 minutes).
    /// PRECONDITION: `attrs` was filled before this call (say, when the transfer was created):
    /// it is read as two 8-byte words.
    [[gnu::always_inline]] void record_transfer(direction dir,
                                                std::uint64_t timestamp_us,
                                                std::uint64_t bytes,
                                                std::uint64_t requests,
                                                std::uint64_t post_us,
                                                std::uint64_t xfer_us,
                                                const transfer_attributes& attrs = no_attributes,
                                                std::string_view request_id = {},
                                                transfer_shape shape = {}) noexcept {
        stage_transfer(transfer_kind(dir), timestamp_us, bytes, requests, post_us, xfer_us, attrs,
                       detail::slot_flag::timed, request_id, shape);
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
        stage_transfer(transfer_kind(dir), timestamp_us, bytes, requests, 0, 0, attrs, 0,
                       request_id, shape);
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
            stage_transfer(notified_kind(dir), timestamp_us, bytes, 1, 0, 0, attrs, 0, request_id,
                           {});
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

    /// The slot kind of a transfer this agent made.
    static constexpr detail::record_kind transfer_kind(direction dir) noexcept {
        return dir == direction::tx ? detail::record_kind::transfer_tx
                                    : detail::record_kind::transfer_rx;
    }
    /// The record kind of a notified transfer: its own kind, so that telling it from the
    /// agent's own transfers costs the hot path no store (fill_transfer writes the kind anyway).
    static constexpr detail::record_kind notified_kind(direction dir) noexcept {
        return dir == direction::tx ? detail::record_kind::transfer_notified_tx
                                    : detail::record_kind::transfer_notified_rx;
    }

    /// Writes a transfer's first slot (see staged_record): four 8-byte stores.
    static void fill_transfer(detail::staged_record& r,
                              detail::record_kind kind,
                              std::uint64_t timestamp_us,
                              std::uint64_t bytes,
                              std::uint64_t requests,
                              std::uint64_t post_us,
                              std::uint64_t xfer_us,
                              std::uint8_t flags,
                              std::uint64_t way_bits,
                              transfer_shape shape) noexcept {
        using layout = detail::slot_layout;
        r.timestamp_us = timestamp_us;
        r.value = bytes;
        const std::uint64_t req = requests < layout::max_requests ? requests : layout::max_requests;
        if constexpr (std::endian::native == std::endian::little) {
            // kind, flags, shape, way and requests as one store, made in a register.
            const std::uint64_t head = std::uint64_t{static_cast<std::uint8_t>(kind)} |
                                       std::uint64_t{flags} << 8 |
                                       std::uint64_t{shape.descriptors} << 16 |
                                       std::uint64_t{shape.lanes} << 32 | way_bits | req << 48;
            std::memcpy(reinterpret_cast<unsigned char*>(&r) + layout::head, &head, sizeof head);
        } else {
            r.kind = kind;
            r.flags = flags;
            r.body[0] = static_cast<unsigned char>(shape.descriptors);
            r.body[1] = static_cast<unsigned char>(shape.descriptors >> 8);
            r.body[2] = shape.lanes;
            r.body[3] = static_cast<unsigned char>(way_bits >> 40);
            r.body[4] = static_cast<unsigned char>(req);
            r.body[5] = static_cast<unsigned char>(req >> 8);
        }
        // Written and read back as one word, so the same on either byte order.
        const std::uint64_t times =
            (post_us < layout::max_time_us ? post_us : layout::max_time_us) |
            (xfer_us < layout::max_time_us ? xfer_us : layout::max_time_us) << 32;
        std::memcpy(reinterpret_cast<unsigned char*>(&r) + layout::times, &times, sizeof times);
    }

    /// Stages a transfer: one slot when `attrs` are those the thread staged last, its requests
    /// fit, it has no request id and the ring needs no room made (the hot path: two compares,
    /// no hash); else stage_transfer_slow, which makes room or counts the drop. Forced inline:
    /// as a call it spent more on saving registers than on the record. `attrs` by value: a set
    /// the compiler knows (no_attributes, the default) is then compared from a register it fills
    /// once per loop, not loaded every transfer.
    [[gnu::always_inline]] void stage_transfer(detail::record_kind kind,
                                               std::uint64_t timestamp_us,
                                               std::uint64_t bytes,
                                               std::uint64_t requests,
                                               std::uint64_t post_us,
                                               std::uint64_t xfer_us,
                                               transfer_attributes attrs,
                                               std::uint8_t flags,
                                               std::string_view request_id,
                                               transfer_shape shape) noexcept {
        if constexpr (enabled) {
            detail::staging_ring* ring = registry_.local_ring();
            if (ring == nullptr) [[unlikely]] {
                return;  // counted by local_ring
            }
            const detail::attribute_cache& sent = ring->sent_attributes();
            std::uint64_t head;
            if ((request_id.empty() || !takes_transfers) &&
                requests <= detail::slot_layout::max_requests && sent.is_last(&attrs) &&
                ring->claim_fast(head)) [[likely]] {
                fill_transfer(
                    ring->slot_at(head), kind, timestamp_us, bytes, requests, post_us, xfer_us,
                    flags, detail::attribute_cache::way_bits(detail::attribute_cache::same_as_last),
                    shape);
                ring->publish_claimed(head);
                return;
            }
            std::uint64_t w[2];
            std::memcpy(w, &attrs, sizeof w);
            stage_transfer_slow(*ring, kind, timestamp_us, bytes, requests, post_us, xfer_us, w[0],
                                w[1], flags, takes_transfers ? request_id : std::string_view{},
                                shape);
        }
    }

    /// A transfer whose attributes are not the last: one slot when the cache holds them at
    /// their way, else with them (a transfer_ext slot, which also stores them at their way on
    /// both sides), as when its requests do not fit 16 bits; and
    /// its request id in two more slots when it has one; published together. Without room for
    /// the id, the transfer alone, which loses only its id; without room for that, a counted
    /// drop.
    [[gnu::noinline]] void stage_transfer_slow(detail::staging_ring& ring,
                                               detail::record_kind kind,
                                               std::uint64_t timestamp_us,
                                               std::uint64_t bytes,
                                               std::uint64_t requests,
                                               std::uint64_t post_us,
                                               std::uint64_t xfer_us,
                                               std::uint64_t w0,
                                               std::uint64_t w1,
                                               std::uint8_t flags,
                                               std::string_view request_id,
                                               transfer_shape shape) noexcept {
        using detail::slot_flag;
        const unsigned way = detail::attribute_cache::way_of(w0, w1);
        detail::attribute_cache& sent = ring.sent_attributes();
        const bool found = sent.holds(way, w0, w1);
        const bool extended = requests > detail::slot_layout::max_requests || !found;
        const std::size_t own = extended ? 2 : 1;
        bool tagged = !request_id.empty();
        detail::staged_record* r = tagged ? ring.try_claim_n(own + 2) : nullptr;
        if (r == nullptr) {
            tagged = false;
            r = ring.try_claim_n(own);
        }
        if (r == nullptr) {
            ring.note_drop();
            return;
        }
        if (extended) {
            flags |= slot_flag::extended | slot_flag::continued;
        } else if (tagged) {
            flags |= slot_flag::continued;
        }
        fill_transfer(*r, kind, timestamp_us, bytes, requests, post_us, xfer_us, flags,
                      detail::attribute_cache::way_bits(way), shape);
        // The slot names the way: the set there becomes the last on both sides.
        detail::staged_record* last = r;
        if (extended) {
            detail::staged_record* x = ring.next_of(r);
            detail::ext_layout::write(*x, w0, w1, requests, tagged);
            sent.store(way, w0, w1);
            last = x;
        } else {
            sent.remember(way);
        }
        if (tagged) {
            detail::staged_record* h = ring.next_of(last);
            detail::tag_layout::write(*h, *ring.next_of(h), clip_request_id(request_id));
        }
        ring.publish_n(own + (tagged ? 2 : 0));
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
                detail::staging_ring& from = *ring;
                const std::size_t n = from.drain(
                    [this, &from](const detail::staged_record& r) { take_slot(r, from); }, take);
                group_size_ = 0;  // a drain never ends inside a record; never left dangling
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

    /// Gathers a record's slots (a drain hands them one by one, and never ends inside a record)
    /// and expands the record at its last.
    void take_slot(const detail::staged_record& r, detail::staging_ring& ring) {
        if ((r.flags & detail::slot_flag::continued) == 0) [[likely]] {
            if (group_size_ == 0) [[likely]] {
                const detail::staged_record* one = &r;
                expand(&one, 1, ring);
                return;
            }
            group_[group_size_++] = &r;
            expand(group_.data(), group_size_, ring);
            group_size_ = 0;
            return;
        }
        if (group_size_ == group_.size()) {
            group_size_ = 0;  // longer than any record: not one of ours; start again
        }
        group_[group_size_++] = &r;
    }

    /// Expands one record from its `n` slots.
    void expand(const detail::staged_record* const* slots,
                std::size_t n,
                detail::staging_ring& ring) {
        const detail::staged_record& r = *slots[0];
        switch (r.kind) {
            case detail::record_kind::event:
                if (n == 2 && slots[1]->kind == detail::record_kind::event_tail) {
                    push_plain(detail::event_layout::read(r, *slots[1]));
                }
                return;
            case detail::record_kind::transfer_tx:
            case detail::record_kind::transfer_rx:
            case detail::record_kind::transfer_notified_tx:
            case detail::record_kind::transfer_notified_rx:
                expand_transfer(slots, n, ring);
                return;
            default:
                return;  // a part without its head: not written by stage_*
        }
    }

    void expand_transfer(const detail::staged_record* const* slots,
                         std::size_t n,
                         detail::staging_ring& ring) {
        using layout = detail::slot_layout;
        const detail::staged_record& r = *slots[0];
        const auto* bytes = reinterpret_cast<const unsigned char*>(&r);
        // Before the extension's store below, which makes its set the last again.
        const unsigned way = ring.received_attributes().resolve(bytes[layout::way]);
        std::uint64_t requests = std::uint64_t{bytes[layout::requests]} |
                                 std::uint64_t{bytes[layout::requests + 1]} << 8;
        std::uint64_t times;
        std::memcpy(&times, bytes + layout::times, sizeof times);
        const std::uint64_t post_us = times & layout::max_time_us;
        const std::uint64_t xfer_us = times >> 32;
        const bool timed = (r.flags & detail::slot_flag::timed) != 0;
        [[maybe_unused]] std::size_t next = 1;
        transfer_attributes attrs;
        if ((r.flags & detail::slot_flag::extended) != 0) {
            if (n < 2 || slots[1]->kind != detail::record_kind::transfer_ext) {
                return;
            }
            std::uint64_t w[2];
            detail::ext_layout::read(*slots[1], w, requests);
            ring.received_attributes().store(way, w[0], w[1]);
            next = 2;
        }
        attrs = ring.received_attributes().at(way);
        const bool tx = r.kind == detail::record_kind::transfer_tx ||
                        r.kind == detail::record_kind::transfer_notified_tx;
        const bool notified = r.kind == detail::record_kind::transfer_notified_tx ||
                              r.kind == detail::record_kind::transfer_notified_rx;
        if constexpr (takes_transfers) {
            transfer_record& t = transfers_.emplace_back(
                transfer_record{r.timestamp_us, r.value, requests, post_us, xfer_us,
                                tx ? direction::tx : direction::rx, attrs, timed});
            t.notified = notified;
            t.shape.descriptors =
                static_cast<std::uint16_t>(bytes[layout::shape] | bytes[layout::shape + 1] << 8);
            t.shape.lanes = bytes[layout::shape + 2];
            if (next + 2 == n && slots[next]->kind == detail::record_kind::transfer_tag &&
                slots[next + 1]->kind == detail::record_kind::tag_tail) {
                const std::size_t at = tag_text_.size();
                detail::tag_layout::read(*slots[next], *slots[next + 1], tag_text_);
                tags_.push_back({transfers_.size() - 1, at, tag_text_.size() - at});
            }
        }
        if (notified) {
            return;  // another agent's transfer: no agent_*_bytes event counts it here
        }
        if constexpr (!expands_transfers) {
            // Every exporter takes the record itself: its events are only counted.
            unexpanded_ += detail::events_of_transfer(attrs.status, timed);
            return;
        }
        if (attrs.status != transfer_status::success) {
            return;
        }
        push_event(r.timestamp_us, category::transfer,
                   tx ? names::agent_tx_bytes : names::agent_rx_bytes, r.value,
                   value_kind::counter);
        push_event(r.timestamp_us, category::transfer,
                   tx ? names::agent_tx_requests_num : names::agent_rx_requests_num, requests,
                   value_kind::counter);
        if (!timed) {
            return;
        }
        push_event(r.timestamp_us, category::performance, names::agent_xfer_time, xfer_us,
                   value_kind::sample);
        push_event(r.timestamp_us, category::performance, names::agent_xfer_post_time, post_us,
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
    /// The slots of the record take_slot is gathering (at most a transfer, its extension and
    /// its id's two); valid within one drain.
    std::array<const detail::staged_record*, 4> group_{};
    std::size_t group_size_ = 0;
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
