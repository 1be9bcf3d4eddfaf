#pragma once
// Helpers for the agent tests: a temporary directory, the telemetry configuration that writes
// flight recorders into it, reading a flight recorder back, and waiting for a transfer.

#include <stdlib.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "test_util.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace agent_test {

using xtel_test::temp_dir;

/// Telemetry on, the buffer exporter writing into `dir`, room for every event a test makes.
inline xtel::config telemetry_config(const temp_dir& dir) {
    xtel::config c;
    c.enabled = true;
    c.exporters = {"buffer"};
    c.output_path = dir.path().string();
    c.buffer_size = 1 << 16;
    c.run_interval = std::chrono::milliseconds(20);
    return c;
}

/// Every event in a flight recorder file, oldest first; none may have been overwritten.
inline std::vector<xtel::event> read_events(const std::filesystem::path& file) {
    xtel::flight_recorder::reader r(file);
    std::vector<xtel::event> out;
    r.poll([&](const xtel::event& e) { out.push_back(e); });
    REQUIRE(r.missed() == 0);
    return out;
}

/// Per event name: the sum of the values, how many events, and the values in order.
struct summary {
    std::map<std::string, std::uint64_t> sum;
    std::map<std::string, std::uint64_t> count;
    std::map<std::string, std::vector<std::uint64_t>> values;

    std::uint64_t sum_of(const std::string& name) const {
        const auto it = sum.find(name);
        return it == sum.end() ? 0 : it->second;
    }
    std::uint64_t count_of(const std::string& name) const {
        const auto it = count.find(name);
        return it == count.end() ? 0 : it->second;
    }
    std::vector<std::uint64_t> values_of(const std::string& name) const {
        const auto it = values.find(name);
        return it == values.end() ? std::vector<std::uint64_t>{} : it->second;
    }
    /// How many events of a category.
    std::uint64_t in_category(xtel::category c) const {
        return by_category.count(c) ? by_category.at(c) : 0;
    }

    std::map<xtel::category, std::uint64_t> by_category;
};

inline summary summarize(const std::vector<xtel::event>& events) {
    summary s;
    for (const auto& e : events) {
        const std::string name(e.name_view());
        s.sum[name] += e.value;
        s.count[name] += 1;
        s.values[name].push_back(e.value);
        s.by_category[e.cat] += 1;
    }
    return s;
}

inline summary summarize_file(const std::filesystem::path& file) {
    return summarize(read_events(file));
}

/// Polls a posted transfer until it is no longer in progress; `also` (a target in this
/// process) is progressed alongside. Fails the test after `limit`.
inline xtel::status wait_for(xtel::agent& a,
                             xtel::transfer_handle h,
                             xtel::agent* also = nullptr,
                             std::chrono::seconds limit = std::chrono::seconds(10)) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (true) {
        xtel::status st = a.poll(h);
        if (st.code() != xtel::status_code::in_progress) {
            return st;
        }
        if (also != nullptr) {
            also->progress();
        }
        if (std::chrono::steady_clock::now() > give_up) {
            FAIL("transfer still in progress after " << limit.count() << " s");
        }
    }
}

/// Posts and waits: the status the transfer ended with.
inline xtel::status run(xtel::agent& a, xtel::transfer_handle h, xtel::agent* also = nullptr) {
    xtel::status st = a.post(h);
    if (st.code() != xtel::status_code::in_progress) {
        return st;
    }
    return wait_for(a, h, also);
}

/// The byte stream xfer_demo fills buffers with (the same function as in xfer_demo.cpp), so
/// these tests can check what the demo's target holds and writes.
inline std::uint64_t demo_word(std::uint64_t seed, std::uint64_t index) {
    std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + index;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

inline void demo_fill(std::byte* p, std::uint64_t n, std::uint64_t seed) {
    for (std::uint64_t i = 0; i < n / 8; ++i) {
        const std::uint64_t w = demo_word(seed, i);
        std::memcpy(p + i * 8, &w, 8);
    }
}

inline bool demo_check(const std::byte* p, std::uint64_t n, std::uint64_t seed) {
    for (std::uint64_t i = 0; i < n / 8; ++i) {
        const std::uint64_t w = demo_word(seed, i);
        if (std::memcmp(p + i * 8, &w, 8) != 0) {
            return false;
        }
    }
    return true;
}

}  // namespace agent_test
