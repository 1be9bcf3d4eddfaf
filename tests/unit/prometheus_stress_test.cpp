// The Prometheus endpoint under every kind of hostile client at once, for a while: short
// connections, more connections than its limit (so it keeps evicting), slow clients, clients that
// never read their answers, oversized heads and unwanted bodies, while real scrapes run. Seconds
// from XTEL_STRESS_SECONDS (default 5; scripts/test gives the sanitizer stages 30).

#include <dirent.h>
#include <httplib.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hostile_clients.hpp"
#include "prometheus_fixtures.hpp"

using prom_test::exporter_under_test;
using prom_test::log_capture;
using prom_test::tx_transfer;

namespace {

using clock_type = std::chrono::steady_clock;

std::chrono::seconds stress_duration() {
    const char* v = std::getenv("XTEL_STRESS_SECONDS");
    const int s = v != nullptr ? std::atoi(v) : 0;
    return std::chrono::seconds(s > 0 ? s : 5);
}

/// Entries of a directory under /proc/self, without . and ..
int count_entries(const char* dir) {
    DIR* d = ::opendir(dir);
    if (d == nullptr) {
        return -1;
    }
    int n = 0;
    while (const dirent* e = ::readdir(d)) {
        n += e->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(d);
    return n - 1;  // the directory stream's own descriptor
}

int open_fds() {
    return count_entries("/proc/self/fd");
}

/// The count of open descriptors once it has not changed for 300 ms (at most 5 s): the endpoint
/// closes its side of a connection a moment after the client has closed its own.
int settled_fds() {
    const auto give_up = clock_type::now() + std::chrono::seconds(5);
    int last = open_fds();
    auto since = clock_type::now();
    while (clock_type::now() - since < std::chrono::milliseconds(300) &&
           clock_type::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (const int now = open_fds(); now != last) {
            last = now;
            since = clock_type::now();
        }
    }
    return last;
}

/// Whether a thread of this process has the endpoint's thread name.
bool endpoint_thread_running() {
    DIR* d = ::opendir("/proc/self/task");
    bool found = false;
    while (const dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
        std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string name;
        found = found || (std::getline(comm, name) && name == "xtel-metrics");
    }
    if (d != nullptr) {
        ::closedir(d);
    }
    return found;
}

/// The body of one scrape; empty unless it got 200.
std::string scrape(std::uint16_t port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    const auto res = c.Get("/metrics");
    return res && res->status == 200 ? res->body : std::string();
}

}  // namespace

TEST_CASE(
    "every real scrape gets the whole body while short, slow, crowding and unread clients "
    "attack",
    "[http]") {
    const auto duration = stress_duration();
    const log_capture log;
    exporter_under_test t;
    t.flush(tx_transfer(123, 1, 1));
    const std::uint16_t port = t.exporter.port();
    // Whole bodies compared, but for the process metrics' values, which change between scrapes.
    const std::string expected = prom_test::without_process_values(scrape(port));
    REQUIRE(expected.find(R"(agent_tx_bytes_total{agent_name="a1",hostname="h"} 123)") !=
            std::string::npos);
    const int fds_before = settled_fds();  // the reference scrape's connection closed

    xtel_bench::hostile_clients::options o;
    using kind = xtel_bench::hostile_clients::kind;
    o.port = port;
    o.connections = 160;  // the endpoint keeps 64
    o.reconnect = std::chrono::milliseconds(5);
    o.trickle = std::chrono::milliseconds(30);
    o.scrape_every = std::chrono::milliseconds(0);  // the scrapers below check whole bodies
    o.mix = {kind::brief, kind::slow,      kind::idle, kind::unread,
             kind::brief, kind::oversized, kind::body, kind::slow};
    std::atomic<int> scrapes{0};
    std::atomic<int> wrong{0};
    {
        xtel_bench::hostile_clients attack(o);
        const auto end = clock_type::now() + duration;
        std::vector<std::thread> scrapers;
        for (int i = 0; i < 2; ++i) {
            scrapers.emplace_back([&] {
                while (clock_type::now() < end) {
                    (prom_test::without_process_values(scrape(port)) == expected ? scrapes
                                                                                 : wrong)++;
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                }
            });
        }
        for (auto& s : scrapers) {
            s.join();
        }
        attack.stop();
        INFO(attack.opened() << " hostile connections in " << duration.count() << " s");
        CHECK(attack.opened() > static_cast<std::uint64_t>(100 * duration.count()));
    }
    INFO(scrapes.load() << " scrapes got the whole body, " << wrong.load() << " did not");
    CHECK(wrong.load() == 0);
    CHECK(scrapes.load() >= 2 * duration.count());
    CHECK_FALSE(log.find(xtel::log_level::warning, "connections at once").empty());
    CHECK(endpoint_thread_running());

    // Every connection the attack left is closed by the endpoint once its client has gone.
    const auto give_up = clock_type::now() + std::chrono::seconds(15);
    while (open_fds() != fds_before && clock_type::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(open_fds() == fds_before);
    CHECK(prom_test::without_process_values(scrape(port)) == expected);
}
