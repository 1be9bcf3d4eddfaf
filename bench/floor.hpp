#pragma once
// The floors of a per-transfer record (telemetry_bench.cpp, lookup_bench.cpp): the cheapest
// record the harness knows, its ring, its timed loop and the drain that weighs what xtel's
// buffer flush does.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <type_traits>
#include <vector>

#include "bench_util.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/names.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace xtel_bench {

/// The floor's record: a transfer's four values and its timestamp in 32 bytes, two to a line.
struct floor_record {
    std::uint64_t timestamp_us;
    std::uint64_t bytes;
    std::uint32_t requests;
    std::uint32_t post_us;
    std::uint32_t xfer_us;
    std::uint32_t direction;
};
static_assert(sizeof(floor_record) == 32);

/// The same record grown to a line of its own, as xtel stages a transfer (its attributes,
/// zero here, fill the rest): what the record's size alone costs the floor.
struct alignas(64) line_floor_record {
    floor_record values;
    std::uint64_t attributes[4];
};
static_assert(sizeof(line_floor_record) == 64);

inline const floor_record& values_of(const floor_record& r) {
    return r;
}
inline const floor_record& values_of(const line_floor_record& r) {
    return r.values;
}

/// The floor of a per-transfer record: the same four values (plus the timestamp) pushed as one
/// record into a plain per-thread single-producer, single-consumer ring of 4,096 slots,
/// with one counter per side, and drained as the harness drains xtel's rings (every
/// flush_every transfers, on the recording thread, timed apart). No registry lookup, no
/// flusher: what is left is the cheapest honest way to hand a transfer to another thread. A
/// full ring drops and counts, as xtel's does.
template <class Record = floor_record>
class spsc_floor_ring {
  public:
    using record = Record;
    static constexpr std::uint64_t slots = 4096;

    spsc_floor_ring() : records_(std::make_unique<record[]>(slots)) {}

    /// Producer. The consumer's counter is re-read only when the ring looks full.
    [[gnu::always_inline]] bool push(const record& r) noexcept {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);  // only writer
        if (head - cached_tail_ == slots) [[unlikely]] {
            // Acquire: the consumer has finished reading the slots it freed.
            cached_tail_ = tail_.load(std::memory_order_acquire);
            if (head - cached_tail_ == slots) {
                ++dropped_;
                return false;
            }
        }
        records_[head & (slots - 1)] = r;
        // Release: the record is written before the consumer can see the new head.
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

    /// Consumer: reads every published record, then frees their slots.
    template <class F>
    std::size_t drain(F&& f) {
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);  // only writer
        const std::uint64_t head = head_.load(std::memory_order_acquire);
        for (std::uint64_t i = tail; i != head; ++i) {
            f(records_[i & (slots - 1)]);
        }
        tail_.store(head, std::memory_order_release);
        return static_cast<std::size_t>(head - tail);
    }

    std::uint64_t dropped() const noexcept { return dropped_; }

  private:
    // Producer's line.
    alignas(64) std::atomic<std::uint64_t> head_{0};
    std::uint64_t cached_tail_ = 0;
    std::uint64_t dropped_ = 0;
    // Consumer's line.
    alignas(64) std::atomic<std::uint64_t> tail_{0};
    std::unique_ptr<record[]> records_;
};

/// The floor's timed loop: one record per iteration, and every flush_every records the ring
/// drained by `drain(ring)`, timed apart (split_clock).
template <class Ring, class Drain>
void floor_loop(benchmark::State& state, Ring& ring, Drain&& drain) {
    split_clock clock(state);
    {
        const pin_scope pin(state.thread_index());
        std::uint64_t i = 0;
        clock.start();
        for (auto _ : state) {
            ++i;
            const floor_record rec{.timestamp_us = 1'700'000'000'000'000 + i,
                                   .bytes = 65536,
                                   .requests = 1,
                                   .post_us = static_cast<std::uint32_t>(i & 7),
                                   .xfer_us = static_cast<std::uint32_t>(i & 63),
                                   .direction = 0};
            if constexpr (std::is_same_v<typename Ring::record, floor_record>) {
                ring.push(rec);
            } else {
                ring.push({.values = rec, .attributes = {}});
            }
            if ((i & (flush_every - 1)) == 0) [[unlikely]] {
                clock.flush([&] { drain(ring); });
            }
        }
        clock.stop();
    }
    state.counters["dropped"] =
        benchmark::Counter(static_cast<double>(ring.dropped()), benchmark::Counter::kAvgThreads);
    state.SetItemsProcessed(state.iterations());
}

/// The drain of the recorder floors: each record expanded into the transfer's four 56-byte
/// events (tx bytes, tx requests, transfer time, post time) and the batch appended to a flight
/// recorder of the default 4,096 slots with one pwrite (xtel::flight_recorder::writer, as the
/// buffer exporter does). `ring.drain(f)` calls f(const floor_record&) for each record.
class recorder_drain {
  public:
    explicit recorder_drain(const std::filesystem::path& dir)
        : recorder_(dir, "floor", xtel::config::default_buffer_size) {
        batch_.reserve(4 * flush_every);
    }

    template <class Ring>
    void operator()(Ring& ring) {
        batch_.clear();
        ring.drain([&](const floor_record& rec) {
            // Each event written in place, field by field (no stack copy: the
            // store-forwarding stall that push_event in telemetry.hpp avoids).
            const std::uint64_t values[4] = {rec.bytes, rec.requests, rec.xfer_us, rec.post_us};
            for (int k = 0; k < 4; ++k) {
                xtel::event& e = batch_.emplace_back();
                e.timestamp_us = rec.timestamp_us;
                e.value = values[k];
                e.cat = k < 2 ? xtel::category::transfer : xtel::category::performance;
                e.kind = k < 2 ? xtel::value_kind::counter : xtel::value_kind::sample;
                std::memcpy(&e.name, &names_[k], sizeof e.name);
            }
        });
        benchmark::DoNotOptimize(recorder_.append(batch_));
    }

  private:
    xtel::flight_recorder::writer recorder_;
    std::vector<xtel::event> batch_;
    const xtel::event_name names_[4] = {
        xtel::names::agent_tx_bytes, xtel::names::agent_tx_requests_num,
        xtel::names::agent_xfer_time, xtel::names::agent_xfer_post_time};
};

}  // namespace xtel_bench
