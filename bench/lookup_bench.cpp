// Where a record's time goes past the floor (docs/performance.md): the floor's ring found as a
// recorder that any thread calls must find it, and xtel's staging ring found as a pipeline finds
// it. In a file of their own, so that adding them leaves telemetry_bench.cpp's code, and the
// layout of the cases they are read beside, as it was.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "bench_util.hpp"
#include "floor.hpp"
#include "xtel/core/ring.hpp"
#include "xtel/core/telemetry_options.hpp"

namespace {

using xtel_bench::floor_loop;
using xtel_bench::floor_record;
using xtel_bench::recorder_drain;
using xtel_bench::spsc_floor_ring;

// Where the record's time goes past the floor: the floors of telemetry_bench.cpp keep their ring
// in the benchmark's frame, where the compiler holds its address in a register. A recorder that any
// thread calls must find the calling thread's ring on every record. These two find it as a
// recorder must, and differ from BM_floor/spsc_ring_recorder in that alone.

/// The floor's ring, found through a thread_local pointer: the cheapest lookup a recorder
/// called from any thread can make, and enough only when there is one recorder per process.
constinit thread_local spsc_floor_ring<>* tls_floor_ring = nullptr;
struct tls_floor_ring_ref {
    using record = floor_record;
    [[gnu::always_inline]] bool push(const floor_record& r) noexcept {
        return tls_floor_ring->push(r);
    }
    template <class F>
    std::size_t drain(F&& f) {
        return tls_floor_ring->drain(std::forward<F>(f));
    }
    std::uint64_t dropped() const noexcept { return tls_floor_ring->dropped(); }
};

void BM_floor_spsc_ring_recorder_tls(benchmark::State& state) {
    const xtel_bench::scratch_dir dir;
    const auto ring = std::make_unique<spsc_floor_ring<>>();
    tls_floor_ring = ring.get();
    recorder_drain drain(dir.path());
    tls_floor_ring_ref ref;
    floor_loop(state, ref, drain);
    tls_floor_ring = nullptr;
}
BENCHMARK(BM_floor_spsc_ring_recorder_tls)->Name("BM_floor/spsc_ring_recorder_tls");

/// xtel's staging ring, found as a pipeline finds it (ring_registry::local_ring: a thread's
/// cache of rings keyed by registry, which several pipelines in one process need), holding the
/// floor's record in one 32-byte slot, with the same drain. What is left between this and
/// BM_transfer_tax/buffer is the pipeline's own: the attribute check and the slot's encoding.
struct registry_ring_ref {
    using record = floor_record;
    xtel::detail::ring_registry registry{xtel::telemetry_options{}.staging_capacity};

    /// Four 8-byte stores, as slot_codec.hpp's transfer_layout::write writes a transfer's slot.
    static void put(xtel::detail::staged_record& s, const floor_record& r) noexcept {
        const std::uint64_t head =
            static_cast<std::uint64_t>(xtel::detail::record_kind::transfer_tx);
        const std::uint64_t times = std::uint64_t{r.post_us} | std::uint64_t{r.xfer_us} << 32;
        auto* bytes = reinterpret_cast<unsigned char*>(&s);
        s.timestamp_us = r.timestamp_us;
        s.value = r.bytes;
        std::memcpy(bytes + xtel::detail::slot_layout::head, &head, sizeof head);
        std::memcpy(bytes + xtel::detail::slot_layout::times, &times, sizeof times);
    }
    [[gnu::always_inline]] bool push(const floor_record& r) noexcept {
        xtel::detail::staging_ring* ring = registry.local_ring();
        if (ring == nullptr) [[unlikely]] {
            return false;
        }
        std::uint64_t head;
        if (ring->claim_fast(head)) [[likely]] {
            put(ring->slot_at(head), r);
            ring->publish_claimed(head);
            return true;
        }
        xtel::detail::staged_record* slot = ring->try_claim();
        if (slot == nullptr) {
            ring->note_drop();
            return false;
        }
        put(*slot, r);
        ring->publish();
        return true;
    }
    template <class F>
    std::size_t drain(F&& f) {
        return registry.local_ring()->drain(
            [&](const xtel::detail::staged_record& s) {
                std::uint64_t times;
                std::memcpy(
                    &times,
                    reinterpret_cast<const unsigned char*>(&s) + xtel::detail::slot_layout::times,
                    sizeof times);
                f(floor_record{.timestamp_us = s.timestamp_us,
                               .bytes = s.value,
                               .requests = 1,
                               .post_us = static_cast<std::uint32_t>(times),
                               .xfer_us = static_cast<std::uint32_t>(times >> 32),
                               .direction = 0});
            },
            std::numeric_limits<std::size_t>::max());
    }
    std::uint64_t dropped() const noexcept { return registry.dropped(); }
};

void BM_floor_staging_ring_registry(benchmark::State& state) {
    const xtel_bench::scratch_dir dir;
    registry_ring_ref ref;
    recorder_drain drain(dir.path());
    floor_loop(state, ref, drain);
}
BENCHMARK(BM_floor_staging_ring_registry)->Name("BM_floor/staging_ring_registry");

}  // namespace
