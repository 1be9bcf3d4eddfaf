#include "nixl/xtel_exporter.hpp"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "core/log.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/telemetry_options.hpp"

namespace xtel::nixl {

namespace {

/// Events a batch holds before its records grow: NIXL's own limit, capped so that a large
/// NIXL_TELEMETRY_BUFFER_SIZE costs memory only when the events come.
constexpr std::size_t max_reserved = 1 << 16;
/// NIXL 1.5.1's events of a completed transfer, at most: the records a batch's events make.
constexpr std::size_t events_a_transfer = 4;
/// Records or events kept for the next round past which a batch is submitted at once: it
/// bounds what batches kept between rounds hold (4,096 records are 352 KiB).
constexpr std::size_t max_pending = 4096;

/// The calling thread, as a value no other live thread has, without a call: the thread pointer
/// (the pthread_t of glibc on x86-64 and aarch64), else pthread_self(). Never 0.
std::uintptr_t calling_thread() noexcept {
#if defined(__x86_64__) || defined(__aarch64__)
    return reinterpret_cast<std::uintptr_t>(__builtin_thread_pointer());
#else
    return static_cast<std::uintptr_t>(::pthread_self());
#endif
}

/// The pipeline's rings stay empty (NIXL's events come through submit): the smallest staging.
constexpr std::size_t unused_staging = 64;

std::unique_ptr<xtel_exporter::pipeline> make_pipeline(const abi_v2::init_params& params,
                                                       const env_lookup& lookup) {
    const config cfg = config::from_env([&lookup](std::string_view name) {
        if (name == env::enable) {
            return std::optional<std::string>("y");
        }
        if (name == env::exporter) {
            return std::optional<std::string>(node_exporter::name);
        }
        return lookup(name);
    });
    return std::make_unique<xtel_exporter::pipeline>(
        cfg, params.agent_name,
        telemetry_options{.staging_capacity = unused_staging, .start_flusher = false});
}

}  // namespace

xtel_exporter::xtel_exporter(const abi_v2::init_params& params,
                             const env_lookup& lookup,
                             std::chrono::milliseconds round_interval) noexcept
    : abi_v2::exporter(params),
      round_interval_ns_(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(round_interval).count())) {
    try {
        batch_.transfers.reserve(std::min(params.max_events_buffered, max_reserved) /
                                 events_a_transfer);
        telemetry_ = make_pipeline(params, lookup);
        // The model's latency histograms take counts by bucket (not native buckets): the
        // batch's transfers are summed, but for those the span stage may keep.
        const auto bounds = telemetry_->metric_state().latency_bounds();
        if (!bounds.empty()) {
            batch_.tallies.configure(
                bounds, trace::sampler_settings::from_env(),
                clock::now_us() ^ reinterpret_cast<std::uintptr_t>(this) * 0x9E3779B97F4A7C15ull);
        }
    } catch (const std::exception& e) {
        detail::log(log_level::error,
                    "NIXL telemetry exporter xtel, agent '{}': {}; its events are counted and "
                    "dropped, and its transfers go on",
                    params.agent_name, e.what());
    } catch (...) {
        detail::log(log_level::error,
                    "NIXL telemetry exporter xtel, agent '{}': set-up failed; its events are "
                    "counted and dropped, and its transfers go on",
                    params.agent_name);
    }
}

xtel_exporter::~xtel_exporter() {
    const std::lock_guard lock(mutex_);
    if (batch_owner_.load(std::memory_order_relaxed) != 0 || batch_events_ > 0) {
        // A batch NIXL never ended, and the batches kept for the next round, are not lost.
        submit_batch(true);
    }
    telemetry_.reset();  // its last round, and the node file marked closed
}

abi_v2::status xtel_exporter::export_event(const abi_v2::event& e) noexcept {
    if (batch_owner_.load(std::memory_order_relaxed) == calling_thread()) {
        // This thread's batch, which no other thread touches until its on_batch_end.
        ++batch_events_;
        try {
            mapper_.add(e, batch_);
        } catch (...) {
            --batch_events_;
            dropped_.fetch_add(1, std::memory_order_relaxed);
        }
        return abi_v2::status::success;
    }
    export_alone(e);
    return abi_v2::status::success;
}

void xtel_exporter::export_alone(const abi_v2::event& e) noexcept {
    const std::lock_guard lock(mutex_);
    try {
        map_flush(std::span<const abi_v2::event>(&e, 1), clock::now_us(), single_);
    } catch (...) {
        single_.clear();
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    submit(single_, 1, 0);
}

void xtel_exporter::on_batch_begin() noexcept {
    const std::uintptr_t self = calling_thread();
    const std::lock_guard lock(mutex_);
    const std::uintptr_t owner = batch_owner_.load(std::memory_order_relaxed);
    if (owner == self) {
        submit_batch(false);  // two begins in a row: the first batch ended unseen
    } else if (owner != 0) {
        return;  // another thread's batch: this thread's events are submitted alone
    }
    mapper_.begin(clock::now_us());
    batch_owner_.store(self, std::memory_order_relaxed);
}

void xtel_exporter::on_batch_end() noexcept {
    const std::uintptr_t self = calling_thread();
    if (batch_owner_.load(std::memory_order_relaxed) != self) {
        return;  // no batch of this thread's to end
    }
    const std::lock_guard lock(mutex_);
    submit_batch(false);
    batch_owner_.store(0, std::memory_order_relaxed);
}

void xtel_exporter::submit_batch(bool now) noexcept {
    try {
        mapper_.end(batch_);
    } catch (...) {
        // No memory for the last transfer's record: its events are lost with it.
        dropped_.fetch_add(mapper_.gathered(), std::memory_order_relaxed);
        batch_events_ -= mapper_.gathered();
    }
    const std::uint64_t at = clock::monotonic_ns();
    const bool due = now || at - last_round_ns_ >= round_interval_ns_ ||
                     batch_.transfers.size() >= max_pending || batch_.events.size() >= max_pending;
    if (!due) {
        return;  // kept for the next round, with the next batches
    }
    submit(batch_, batch_events_, clock::now_us());
    batch_events_ = 0;
    last_round_ns_ = at;
}

void xtel_exporter::submit(mapped_flush& flush, std::size_t events, std::uint64_t now_us) noexcept {
    if (!telemetry_) {
        dropped_.fetch_add(events, std::memory_order_relaxed);
        flush.clear();
        return;
    }
    try {
        unmapped_.fetch_add(flush.unmapped, std::memory_order_relaxed);
        const std::span<const transfer_tally> tallies = flush.tallies.view(now_us);
        if (!tallies.empty() || !flush.transfers.empty()) {
            telemetry_->submit(tallies, std::span<const transfer_record>(flush.transfers));
        }
        if (!flush.events.empty() || (flush.transfers.empty() && tallies.empty())) {
            // An empty flush is a round too, as the pipeline's own flusher would run.
            telemetry_->submit(std::span<const event>(flush.events));
        }
    } catch (...) {
        dropped_.fetch_add(events, std::memory_order_relaxed);
    }
    flush.clear();
}

}  // namespace xtel::nixl
