// The standard process metrics, checked against what the kernel says through other calls
// (getrusage, getrlimit, descriptors the test opens).

#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "xtel/metrics/process_metrics.hpp"

namespace process_metrics_test {

namespace {

std::optional<std::uint64_t> value_of(const xtel::metrics::snapshot& s, std::string_view name) {
    for (const auto& f : s.families) {
        if (f.spec.name == name && f.series.size() == 1) {
            return f.series[0].value;
        }
    }
    return std::nullopt;
}

std::uint64_t cpu_us() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    const auto us = [](const timeval& t) {
        return static_cast<std::uint64_t>(t.tv_sec) * 1000000 +
               static_cast<std::uint64_t>(t.tv_usec);
    };
    return us(u.ru_utime) + us(u.ru_stime);
}

}  // namespace

TEST_CASE("process CPU time lies between two getrusage readings around it") {
    // Burn some CPU so the value is not 0.
    volatile std::uint64_t sink = 0;
    for (std::uint64_t i = 0; i < 50'000'000; ++i) {
        sink = sink + i;
    }
    const std::uint64_t before = cpu_us();
    const auto s = xtel::metrics::process_snapshot();
    const std::uint64_t after = cpu_us();
    const auto cpu = value_of(s, "process_cpu_seconds_total");
    REQUIRE(cpu);
    // /proc counts in clock ticks (10 ms here), getrusage in microseconds: allow one tick each
    // way.
    const std::uint64_t tick = 1000000 / static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    CHECK(*cpu + 2 * tick >= before);
    CHECK(*cpu <= after + 2 * tick);
    CHECK(*cpu > 0);
}

TEST_CASE("open descriptors count exactly the ones the test opens") {
    const auto s0 = xtel::metrics::process_snapshot();
    int fds[10];
    for (int i = 0; i < 10; i += 2) {
        REQUIRE(::pipe(&fds[i]) == 0);
    }
    const auto s1 = xtel::metrics::process_snapshot();
    for (const int fd : fds) {
        ::close(fd);
    }
    REQUIRE(value_of(s0, "process_open_fds"));
    CHECK(*value_of(s1, "process_open_fds") == *value_of(s0, "process_open_fds") + 10);
    rlimit r{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &r) == 0);
    CHECK(value_of(s0, "process_max_fds") == r.rlim_cur);
}

TEST_CASE("memory and start time are plausible and in base units") {
    const auto s = xtel::metrics::process_snapshot();
    const auto rss = value_of(s, "process_resident_memory_bytes");
    const auto vsize = value_of(s, "process_virtual_memory_bytes");
    REQUIRE(rss);
    REQUIRE(vsize);
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    CHECK(*rss > 1u << 20);                                         // more than 1 MiB
    CHECK(*rss <= static_cast<std::uint64_t>(u.ru_maxrss) * 1024);  // never above the peak
    CHECK(*vsize >= *rss);
    const auto start = value_of(s, "process_start_time_seconds");  // hundredths of a second
    REQUIRE(start);
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    CHECK(*start * 10 <= static_cast<std::uint64_t>(now) + 1000);
    CHECK(*start * 10 + 3'600'000 > static_cast<std::uint64_t>(now));  // this test binary
    for (const auto& f : s.families) {
        INFO(f.spec.name);
        CHECK(f.spec.name.starts_with("process_"));
        CHECK(f.series[0].label_values.empty());
    }
}

}  // namespace process_metrics_test
