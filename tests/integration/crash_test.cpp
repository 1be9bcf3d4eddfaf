#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "test_util.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace crash_test {

TEST_CASE("a writer killed with SIGKILL mid-stream leaves every published event readable") {
    xtel_test::temp_dir dir;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The writer: records numbered events forever, flushing every millisecond.
        xtel::config cfg;
        cfg.enabled = true;
        cfg.buffer_size = 1 << 20;
        cfg.run_interval = std::chrono::milliseconds(1);
        cfg.output_path = dir.path().string();
        xtel::buffer_telemetry t(cfg, "victim", {.staging_capacity = 1 << 16});
        for (std::uint64_t i = 0;; ++i) {
            t.record_at(i, xtel::category::custom, "numbered", i);
            if (i % 64 == 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        }
    }
    // Wait until a good number of events is published, then kill the writer mid-stream.
    const auto path = dir / "victim";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::uint64_t before_kill = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (std::filesystem::exists(path)) {
            xtel::flight_recorder::reader probe(path);
            before_kill = probe.published_count();
            if (before_kill >= 20'000) {
                break;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(before_kill >= 20'000);

    xtel::flight_recorder::reader r(path);
    CHECK_FALSE(r.writer_closed());  // it never got to close the file
    const auto published = r.published_count();
    CHECK(published >= before_kill);
    REQUIRE(published < r.capacity());  // nothing was overwritten, so nothing may be missing
    std::uint64_t expected = 0;
    std::uint64_t out_of_order = 0;
    r.poll([&](const xtel::event& e) {
        if (e.value != expected || e.timestamp_us != expected) {
            ++out_of_order;
        }
        ++expected;
    });
    CHECK(out_of_order == 0);
    CHECK(expected == published);
    CHECK(r.missed() == 0);

    // The reader program ends cleanly on the dead writer's file too.
    const auto out = xtel_test::run({XTEL_TELEMETRY_READER, path.string(), "--json"});
    CHECK(out.exit_code == 0);
    CHECK_THAT(out.err, Catch::Contains(std::to_string(published) + " events read, 0 missed"));
}

}  // namespace crash_test
