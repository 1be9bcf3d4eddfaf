#pragma once
/// The telemetry pipeline: `telemetry<Exporters...>`, a recording front end (front_end.hpp)
/// and a back end (back_end.hpp) joined by the flusher thread.
///
/// Recording threads stage compact records into rings that only they write; the flusher
/// thread runs one back-end round every run interval (sooner when a ring fills), and once more
/// on destruction. There is no virtual call on either path, and `telemetry<>` (disabled)
/// compiles every record call to nothing.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "xtel/core/back_end.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/event.hpp"
#include "xtel/core/exporter.hpp"
#include "xtel/core/front_end.hpp"
#include "xtel/core/ring.hpp"
#include "xtel/core/telemetry_options.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel {

namespace detail {
/// How the flusher sleeps and is woken early. A base of the pipeline, so that it is built
/// before the front end, whose rings signal through it, and outlives it.
struct flusher_wakeup {
    std::mutex mutex;
    std::condition_variable cv;
    flush_signal signal{cv};
};
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

/// The record calls (record, record_at, add, set, record_transfer, record_transfer_counts,
/// record_notified) are the front end's, inherited: see front_end.hpp.
template <exporter... Exporters>
class basic_telemetry<exporter_list<Exporters...>>
    : private detail::flusher_wakeup,
      public front_end<(sizeof...(Exporters) > 0), back_end<Exporters...>::takes_transfers> {
    using back_end_type = back_end<Exporters...>;
    using front_end_type = front_end<(sizeof...(Exporters) > 0), back_end_type::takes_transfers>;

  public:
    /// False for `telemetry<>`, whose record calls do nothing.
    static constexpr bool enabled = sizeof...(Exporters) > 0;
    /// Whether any exporter takes whole transfer records (back_end.hpp).
    static constexpr bool takes_transfers = back_end_type::takes_transfers;
    /// The metric model the exporters that declare `metric_state` serve, or void, and whether
    /// the pipeline owns one.
    using metric_state_type = typename back_end_type::metric_state_type;
    static constexpr bool owns_metric_state = back_end_type::owns_metric_state;

    /// Builds every exporter (their set-up errors propagate) and starts the flusher.
    basic_telemetry(const config& cfg, std::string agent_name, telemetry_options opts = {})
        : front_end_type(opts.staging_capacity, opts.start_flusher ? &signal : nullptr),
          agent_name_(std::move(agent_name)),
          interval_(cfg.run_interval),
          back_(exporter_context{cfg, agent_name_}, labels_, opts.batch_size) {
        if constexpr (enabled) {
            if (opts.start_flusher) {
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
                const std::lock_guard lock(mutex);
                stopping_ = true;
            }
            cv.notify_all();
            if (flusher_.joinable()) {
                flusher_.join();
            }
            flush();
            back_.stop();
        }
    }

    /// How many flushes have run, timer or manual: it changes once per run interval, so a
    /// recorder can tell, with one load of a line that rarely changes, that an interval
    /// passed. Zero for `telemetry<>`.
    std::uint64_t flushes() const noexcept { return back_.rounds(); }

    /// The strings transfer attributes refer to. intern() is for slow paths only.
    label_table& labels() noexcept { return labels_; }
    const label_table& labels() const noexcept { return labels_; }

    /// Hands everything staged so far to the exporters, on the calling thread. The flusher
    /// calls it on its own; users call it to make events visible without waiting.
    void flush() {
        if constexpr (enabled) {
            const std::lock_guard lock(flush_mutex_);
            back_.drain(this->rings());
            back_.end_round(this->dropped());
        }
    }

    /// Events from a producer that has no ring (a host library's own flush thread): one
    /// back-end round of them, on the calling thread, with what the rings staged so far.
    void submit(std::span<const event> events) { submit_round(events); }

    /// Whole transfers from a producer that has no ring, as submit(events) hands events: each
    /// request_id is copied, and `attrs` name labels of labels().
    void submit(std::span<const transfer_record> transfers) { submit_round(transfers); }

    /// Transfers their producer summed (transfer_tally), with the records of those it did not
    /// (the ones that may become spans), as one round. Only for a pipeline whose exporters
    /// serve the metric model alone (back_end::take's requirement). A template, so that the
    /// explicit instantiation of a pipeline whose back end takes none leaves it out (clang 14
    /// instantiates a non-template member whose constraint is not met).
    template <bool Takes = back_end_type::takes_tallies>
    requires Takes void submit(std::span<const transfer_tally> tallies,
                               std::span<const transfer_record> transfers) {
        if constexpr (enabled) {
            const std::lock_guard lock(flush_mutex_);
            back_.drain(this->rings());
            back_.take(tallies);
            back_.take(transfers);
            back_.end_round(this->dropped());
        }
    }

    telemetry_stats stats() const {
        telemetry_stats s = back_.stats();
        s.records_dropped = this->dropped();
        return s;
    }

    const std::string& agent_name() const noexcept { return agent_name_; }

    /// The agent's metric model that the exporters declaring `metric_state` serve: add a
    /// user's metrics builder to it (metric_state().add_builder). PRECONDITION: its members
    /// called are safe from this thread while the flusher runs (agent_metrics says which).
    template <class M = metric_state_type>
    requires(!std::is_void_v<M>) M& metric_state() noexcept { return back_.metric_state(); }

    /// The exporter of type E. PRECONDITION: E's own members are safe to call from this thread
    /// while the flusher runs (each exporter says which are).
    template <class E>
    E& get() noexcept {
        return back_.template get<E>();
    }

  private:
    template <class Batch>
    void submit_round([[maybe_unused]] Batch batch) {
        if constexpr (enabled) {
            const std::lock_guard lock(flush_mutex_);
            back_.drain(this->rings());
            back_.take(batch);
            back_.end_round(this->dropped());
        }
    }

    /// How often the sleeping flusher looks for an early-flush request whose wake-up was lost.
    static constexpr std::chrono::milliseconds early_flush_poll{50};

    void run_flusher() {
        using steady = std::chrono::steady_clock;
        std::unique_lock lock(mutex);
        auto due = steady::now() + interval_;
        while (!stopping_) {
            // A ring past half full cuts the wait short, so bursts faster than one interval's
            // worth of staging are drained instead of dropped. Its wake-up can be lost (the
            // recorder notifies without the mutex: flush_signal), and a lost one is not sent
            // again while the request stays pending, so the flag is also looked at every
            // early_flush_poll: a lost wake-up costs that much, never a whole interval.
            const auto until = std::min(due, steady::now() + early_flush_poll);
            cv.wait_until(lock, until, [this] { return stopping_ || signal.pending(); });
            if (stopping_) {
                break;
            }
            if (!signal.take() && steady::now() < due) {
                continue;
            }
            lock.unlock();
            flush();
            lock.lock();
            due = steady::now() + interval_;
        }
    }

    const std::string agent_name_;
    const std::chrono::milliseconds interval_;
    label_table labels_;
    /// One round at a time, whoever runs it: the flusher, flush() or submit().
    std::mutex flush_mutex_;
    back_end_type back_;
    bool stopping_ = false;
    std::thread flusher_;
};

}  // namespace xtel
