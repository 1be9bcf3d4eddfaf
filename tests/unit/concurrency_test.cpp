#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace concurrency_test {

namespace {

/// 16-bit check over everything else in the event, so a torn event cannot pass.
std::uint64_t check16(std::uint64_t payload, const xtel::event& e) {
    std::uint64_t h = 0xcbf29ce484222325ull ^ payload;
    h = (h ^ e.timestamp_us) * 0x100000001b3ull;
    h = (h ^ static_cast<std::uint64_t>(e.cat)) * 0x100000001b3ull;
    for (char c : e.name_view()) {
        h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    }
    return (h ^ (h >> 32) ^ (h >> 16)) & 0xffff;
}

bool intact(const xtel::event& e) {
    return check16(e.value >> 16, e) == (e.value & 0xffff);
}

struct follow_result {
    std::uint64_t read = 0;
    std::uint64_t torn = 0;
    std::uint64_t missed = 0;
    std::uint64_t published = 0;
};

}  // namespace

TEST_CASE(
    "readers following a wrapping flight recorder never see a torn event and account for "
    "every event",
    "[concurrency]") {
    xtel_test::temp_dir dir;
    xtel::config cfg;
    cfg.enabled = true;
    cfg.buffer_size = 256;
    cfg.run_interval = std::chrono::milliseconds(1);
    cfg.output_path = dir.path().string();

    constexpr int writers = 4;
    constexpr std::uint64_t per_writer = 50'000;
    std::atomic<bool> pipeline_gone{false};
    follow_result results[2];
    std::vector<std::thread> readers;
    std::uint64_t exported = 0;
    std::uint64_t dropped = 0;
    {
        xtel::buffer_telemetry t(cfg, "wrap", {.staging_capacity = 1 << 17, .batch_size = 4096});
        for (auto& res : results) {
            readers.emplace_back([&res, &dir, &pipeline_gone] {
                xtel::flight_recorder::reader r(dir / "wrap");
                while (true) {
                    // Closed is checked before the poll, so the last poll sees every event.
                    const bool done = pipeline_gone.load() && r.writer_closed();
                    r.poll([&](const xtel::event& e) {
                        ++res.read;
                        if (e.cat == xtel::category::custom && !intact(e)) {
                            ++res.torn;
                        }
                    });
                    if (done) {
                        break;
                    }
                }
                res.missed = r.missed();
                res.published = r.published_count();
            });
        }
        std::vector<std::thread> producers;
        for (int w = 0; w < writers; ++w) {
            producers.emplace_back([&t, w] {
                for (std::uint64_t i = 0; i < per_writer; ++i) {
                    xtel::event e;
                    e.timestamp_us = xtel::clock::now_us();
                    e.cat = xtel::category::custom;
                    e.name = "checked";
                    const std::uint64_t payload = (static_cast<std::uint64_t>(w) << 32) | i;
                    t.record_at(e.timestamp_us, e.cat, e.name,
                                (payload << 16) | check16(payload, e));
                    if (i % 1024 == 0) {
                        std::this_thread::yield();
                    }
                }
            });
        }
        for (auto& p : producers) {
            p.join();
        }
        t.flush();
        exported = t.stats().events_exported;
        dropped = t.stats().records_dropped;
    }
    pipeline_gone = true;
    for (auto& r : readers) {
        r.join();
    }
    CHECK(dropped == 0);
    CHECK(exported == writers * per_writer);
    for (const auto& res : results) {
        INFO("read " << res.read << " missed " << res.missed);
        CHECK(res.torn == 0);
        CHECK(res.published == exported);
        CHECK(res.read + res.missed == exported);
        CHECK(res.read >= cfg.buffer_size);  // at least the final ring's worth
    }
}

}  // namespace concurrency_test
