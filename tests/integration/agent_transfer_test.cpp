// Two agents in one process moving data over UCX (shared memory here), and what their flight
// recorders say about it afterwards.

#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "agent_support.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/agent/device.hpp"

#include <fmt/format.h>

namespace agent_transfer_test {

using namespace agent_test;
using xtel::descriptor;
using xtel::status_code;
using xtel::transfer_handle;
using xtel::transfer_op;
using dv = std::vector<descriptor>;

namespace {

std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    std::vector<std::byte> v(n);
    demo_fill(v.data(), n, seed);
    return v;
}

/// A target and an initiator in this process, the initiator connected to the target.
struct pair_fixture {
    explicit pair_fixture(const temp_dir& dir, xtel::agent_options opts = {})
        : cfg(telemetry_config(dir)),
          target(xtel::make_agent("target", cfg, opts)),
          initiator(xtel::make_agent("initiator", cfg, opts)) {}

    void connect() {
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string name;
        const auto st = initiator->load_remote_metadata(blob, name);
        REQUIRE(st.to_string() == "ok");
        REQUIRE(name == "target");
    }

    xtel::config cfg;
    std::unique_ptr<xtel::agent> target;
    std::unique_ptr<xtel::agent> initiator;
};

transfer_handle create(xtel::agent& a,
                       transfer_op op,
                       const std::vector<descriptor>& local,
                       const std::vector<descriptor>& remote) {
    transfer_handle h;
    const auto st = a.create_transfer(op, local, remote, "target", h);
    REQUIRE(st.to_string() == "ok");
    REQUIRE(h);
    return h;
}

descriptor slice(const std::vector<std::byte>& v, std::size_t offset, std::size_t n) {
    return descriptor::dram(v.data() + offset, n);
}

/// A target with 64 KiB it allocated (written directly, so transfers complete inside post) and
/// an initiator connected to it, for the timing-sample tests.
struct sampled_pair {
    explicit sampled_pair(const xtel::config& cfg, xtel::agent_options initiator_opts = {})
        : target(xtel::make_agent("target", cfg)),
          initiator(xtel::make_agent("initiator", cfg, initiator_opts)),
          local(1 << 16) {
        REQUIRE(target->allocate_memory(local.size(), remote).ok());
        REQUIRE(initiator->register_memory(descriptor::dram(local.data(), local.size())).ok());
        std::vector<std::byte> blob;
        REQUIRE(target->export_metadata(blob).ok());
        std::string name;
        REQUIRE(initiator->load_remote_metadata(blob, name).ok());
    }

    /// A transfer of `n` bytes at `offset` of both sides.
    transfer_handle transfer(transfer_op op, std::uint64_t offset, std::uint64_t n) {
        return create(*initiator, op, {slice(local, offset, n)},
                      {descriptor{remote.address + offset, n}});
    }

    xtel::status run(transfer_handle h) { return agent_test::run(*initiator, h, target.get()); }

    std::unique_ptr<xtel::agent> target;
    std::unique_ptr<xtel::agent> initiator;
    std::vector<std::byte> local;
    descriptor remote;
};

}  // namespace

TEST_CASE("two agents in one process write and read data that arrives intact") {
    temp_dir dir;
    pair_fixture p(dir);
    constexpr std::size_t size = 1 << 20;
    auto remote_mem = pattern(size, 7);
    auto local_mem = pattern(size, 8);
    const auto remote_region = descriptor::dram(remote_mem.data(), size);
    REQUIRE(p.target->register_memory(remote_region).ok());
    REQUIRE(p.initiator->register_memory(descriptor::dram(local_mem.data(), size)).ok());
    p.connect();

    std::vector<descriptor> regions;
    REQUIRE(p.initiator->remote_regions("target", regions).ok());
    REQUIRE(regions == std::vector<descriptor>{remote_region});

    // WRITE in four descriptors of 256 KiB.
    std::vector<descriptor> local, remote;
    for (std::size_t i = 0; i < 4; ++i) {
        local.push_back(slice(local_mem, i * (size / 4), size / 4));
        remote.push_back(slice(remote_mem, i * (size / 4), size / 4));
    }
    const auto w = create(*p.initiator, transfer_op::write, local, remote);
    REQUIRE(run(*p.initiator, w, p.target.get()).ok());
    CHECK(remote_mem == pattern(size, 8));

    // READ the halves crosswise, so a descriptor pair mixed up would show.
    std::fill(local_mem.begin(), local_mem.end(), std::byte{0});
    const auto r = create(*p.initiator, transfer_op::read,
                          {slice(local_mem, 0, size / 2), slice(local_mem, size / 2, size / 2)},
                          {slice(remote_mem, size / 2, size / 2), slice(remote_mem, 0, size / 2)});
    REQUIRE(run(*p.initiator, r, p.target.get()).ok());
    const auto expected = pattern(size, 8);
    CHECK(std::equal(local_mem.begin(), local_mem.begin() + size / 2, expected.begin() + size / 2));
    CHECK(std::equal(local_mem.begin() + size / 2, local_mem.end(), expected.begin()));
    CHECK(p.initiator->release(w).ok());
    CHECK(p.initiator->release(r).ok());
}

TEST_CASE(
    "the initiator's flight recorder sums the bytes and counts the requests of every transfer") {
    temp_dir dir;
    {
        pair_fixture p(dir);
        std::vector<std::byte> remote_mem(1 << 20), local_mem(1 << 20);
        REQUIRE(
            p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
        REQUIRE(p.initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size()))
                    .ok());
        p.connect();

        // 5 writes of 4 + 8 + 16 KiB, 3 reads of 64 KiB.
        const auto w = create(*p.initiator, transfer_op::write,
                              {slice(local_mem, 0, 4096), slice(local_mem, 8192, 8192),
                               slice(local_mem, 65536, 16384)},
                              {slice(remote_mem, 0, 4096), slice(remote_mem, 8192, 8192),
                               slice(remote_mem, 65536, 16384)});
        const auto r = create(*p.initiator, transfer_op::read, {slice(local_mem, 131072, 65536)},
                              {slice(remote_mem, 262144, 65536)});
        for (int i = 0; i < 5; ++i) {
            REQUIRE(run(*p.initiator, w, p.target.get()).ok());
        }
        for (int i = 0; i < 3; ++i) {
            REQUIRE(run(*p.initiator, r, p.target.get()).ok());
        }
        // Polling a completed transfer again records nothing more.
        CHECK(p.initiator->poll(r).ok());
        CHECK(p.initiator->stats().records_dropped == 0);
    }  // both agents flush and close their files here; the files stay for reading

    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == 5 * 28672);
    CHECK(s.values_of("agent_tx_bytes") == std::vector<std::uint64_t>(5, 28672));
    CHECK(s.sum_of("agent_tx_requests_num") == 5);
    CHECK(s.sum_of("agent_rx_bytes") == 3 * 65536);
    CHECK(s.sum_of("agent_rx_requests_num") == 3);
    CHECK(s.count_of("agent_xfer_time") == 8);
    CHECK(s.count_of("agent_xfer_post_time") == 8);
    CHECK(s.in_category(xtel::category::error) == 0);
    CHECK(s.count_of("agent_connect") == 1);
    CHECK(s.count_of("agent_disconnect") == 1);
    CHECK(s.values_of("agent_connections") == std::vector<std::uint64_t>{1, 0});
    CHECK(s.count_of("ucx_backend_init") == 1);
    CHECK(s.in_category(xtel::category::backend) >= 3);  // init, version, a transport gauge

    const auto events = read_events(dir.path() / "initiator");
    REQUIRE(events.size() >= 2);
    CHECK(events.front().name_view() == "agent_start");
    CHECK(events.front().value == static_cast<std::uint64_t>(::getpid()));
    CHECK(events.back().name_view() == "agent_stop");
    CHECK(events.back().cat == xtel::category::system);

    // The target only registered memory; it records no transfers of its own.
    const auto t = summarize_file(dir.path() / "target");
    CHECK(t.count_of("agent_tx_bytes") == 0);
    CHECK(t.count_of("agent_rx_bytes") == 0);
    CHECK(t.values_of("agent_memory_registered") == std::vector<std::uint64_t>{1 << 20, 0});
}

TEST_CASE("with timing sampled, bytes and requests stay exact and one post in N is timed") {
    temp_dir dir;
    constexpr int writes = 100, reads = 60;
    {
        xtel::config cfg = telemetry_config(dir);
        cfg.timing_sample = 8;
        cfg.run_interval = xtel::config::max_run_interval;  // no flush until the end
        sampled_pair p(cfg);
        const auto w = p.transfer(transfer_op::write, 0, 4096);
        const auto r = p.transfer(transfer_op::read, 8192, 8192);
        for (int i = 0; i < writes; ++i) {
            REQUIRE(p.run(w).ok());
            if (i < reads) {
                REQUIRE(p.run(r).ok());
            }
        }
        CHECK(p.initiator->stats().records_dropped == 0);
    }  // the initiator records what it counted but did not time, then flushes

    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == writes * 4096);
    CHECK(s.sum_of("agent_tx_requests_num") == writes);
    CHECK(s.sum_of("agent_rx_bytes") == reads * 8192);
    CHECK(s.sum_of("agent_rx_requests_num") == reads);
    // The first 8 posts are timed, then every 8th: 8 + (160 - 8) / 8.
    CHECK(s.count_of("agent_xfer_time") == 27);
    CHECK(s.count_of("agent_xfer_post_time") == 27);
    // Fewer records than transfers: the untimed ones travel as counts with the timed ones.
    CHECK(s.count_of("agent_tx_requests_num") < writes);
    CHECK(s.count_of("agent_rx_requests_num") < reads);
}

TEST_CASE("a timed transfer that finds its ring full loses its times, never its bytes") {
    // Every transfer timed, a small ring and no flusher: after the first few dozen records the
    // ring is full, and each timed record after that is dropped (and counted). Its completions
    // stay counted in the transfer's slot and reach the pipeline as counts once there is room.
    temp_dir dir;
    constexpr int writes = 3000, reads = 1000;
    std::uint64_t dropped = 0;
    {
        xtel::config cfg = telemetry_config(dir);
        cfg.timing_sample = 1;
        cfg.run_interval = xtel::config::max_run_interval;
        xtel::agent_options opts;
        opts.telemetry.staging_capacity = 64;
        opts.telemetry.start_flusher = false;
        sampled_pair p(cfg, opts);
        std::vector<transfer_handle> w;
        for (std::uint64_t b = 0; b < 4; ++b) {
            w.push_back(p.transfer(transfer_op::write, b * 4096, 4096));
        }
        const auto r = p.transfer(transfer_op::read, 32768, 8192);
        for (int i = 0; i < writes; ++i) {
            REQUIRE(p.run(w[static_cast<std::size_t>(i) % w.size()]).ok());
            if (i % 3 == 0) {
                REQUIRE(p.run(r).ok());
            }
            if (i == writes / 2) {
                p.initiator->flush_telemetry();  // room again, mid-run
            }
        }
        dropped = p.initiator->stats().records_dropped;
    }
    CHECK(dropped > 0);
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == std::uint64_t{writes} * 4096);
    CHECK(s.sum_of("agent_tx_requests_num") == writes);
    CHECK(s.sum_of("agent_rx_bytes") == std::uint64_t{reads} * 8192);
    CHECK(s.sum_of("agent_rx_requests_num") == reads);
    // What was lost is the dropped records' times: fewer timings than transfers.
    CHECK(s.count_of("agent_xfer_time") < writes + reads);
}

TEST_CASE("with the flusher running every millisecond, sampled counts still add up exactly") {
    // Flushes land at arbitrary points of the loop: each one makes the agent record what it
    // had counted, and time the next posts again.
    temp_dir dir;
    constexpr int writes = 20000;
    {
        xtel::config cfg = telemetry_config(dir);
        cfg.timing_sample = 4;
        cfg.run_interval = std::chrono::milliseconds(1);
        sampled_pair p(cfg);
        std::vector<transfer_handle> handles;
        for (std::uint64_t b = 0; b < 8; ++b) {
            handles.push_back(p.transfer(transfer_op::write, b * 4096, 4096));
        }
        for (int i = 0; i < writes; ++i) {
            REQUIRE(p.run(handles[static_cast<std::size_t>(i) % 8]).ok());
        }
        CHECK(p.initiator->stats().records_dropped == 0);
    }
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_tx_bytes") == std::uint64_t{writes} * 4096);
    CHECK(s.sum_of("agent_tx_requests_num") == writes);
    CHECK(s.count_of("agent_xfer_time") >= writes / 4);  // one in 4 at least
    CHECK(s.count_of("agent_xfer_time") < writes);
}

TEST_CASE(
    "untimed completions reach the exporters at release and after a flush the agent notices") {
    temp_dir dir;
    xtel::config cfg = telemetry_config(dir);
    cfg.timing_sample = 4;
    cfg.run_interval = xtel::config::max_run_interval;  // flushes only when this test says
    sampled_pair p(cfg);
    auto& initiator = p.initiator;
    auto& pipeline =
        dynamic_cast<xtel::basic_agent<xtel::buffer_telemetry>&>(*initiator).telemetry();
    auto tx_bytes = [&] {
        pipeline.flush();  // the pipeline's own flush: what the agent staged, no more
        return summarize(read_events(dir.path() / "initiator")).sum_of("agent_tx_bytes");
    };

    // 10 posts of one transfer: the 4 first are timed, then the 8th; the 9th and 10th are
    // counted in the transfer's slot, and release records them.
    const auto w = p.transfer(transfer_op::write, 0, 4096);
    for (int i = 0; i < 10; ++i) {
        REQUIRE(p.run(w).ok());
    }
    CHECK(tx_bytes() == 8 * 4096);
    REQUIRE(initiator->release(w).ok());
    CHECK(tx_bytes() == 10 * 4096);

    // Another transfer, posted until some posts wait uncounted; a flush has passed, and the
    // agent's next call (progress, here) records them.
    const auto w2 = p.transfer(transfer_op::write, 0, 4096);
    for (int i = 0; i < 7; ++i) {
        REQUIRE(p.run(w2).ok());
    }
    const std::uint64_t before = tx_bytes();
    CHECK(before < 17 * 4096);
    CHECK(tx_bytes() == before);  // a flush alone does not see the agent's counts
    (void)initiator->progress();
    CHECK(tx_bytes() == 17 * 4096);

    // flush_telemetry records them too.
    for (int i = 0; i < 7; ++i) {
        REQUIRE(p.run(w2).ok());
    }
    initiator->flush_telemetry();
    CHECK(summarize(read_events(dir.path() / "initiator")).sum_of("agent_tx_bytes") == 24 * 4096);
    CHECK(initiator->release(w2).ok());
}

TEST_CASE("registered bytes go up on registration and down on deregistration") {
    temp_dir dir;
    const auto cfg = telemetry_config(dir);
    {
        auto a = xtel::make_agent("memory", cfg);
        std::vector<std::byte> small(12288), large(1 << 20), kept(8192);
        const auto s = descriptor::dram(small.data(), small.size());
        const auto l = descriptor::dram(large.data(), large.size());
        REQUIRE(a->register_memory(s).ok());
        REQUIRE(a->register_memory(l).ok());
        REQUIRE(a->deregister_memory(s).ok());
        REQUIRE(a->deregister_memory(l).ok());
        REQUIRE(a->register_memory(descriptor::dram(kept.data(), kept.size())).ok());
        // `kept` is still registered when the agent goes: it is deregistered and reported.
    }
    const auto s = summarize_file(dir.path() / "memory");
    CHECK(s.values_of("agent_memory_registered") ==
          std::vector<std::uint64_t>{12288, 12288 + (1 << 20), 1 << 20, 0, 8192, 0});
    CHECK(s.values_of("agent_memory_deregistered") ==
          std::vector<std::uint64_t>{12288, 12288 + (1 << 20), 12288 + (1 << 20) + 8192});
    CHECK(s.in_category(xtel::category::memory) == 9);
}

TEST_CASE("memory the agent allocates is written, read back and freed on deregistration") {
    temp_dir dir;
    pair_fixture p(dir);
    descriptor shared;
    REQUIRE(p.target->allocate_memory(1 << 20, shared).ok());
    REQUIRE(shared.address != 0);
    REQUIRE(shared.length == 1 << 20);
    auto local_mem = pattern(1 << 20, 3);
    REQUIRE(
        p.initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size())).ok());
    p.connect();

    const auto w =
        create(*p.initiator, transfer_op::write, {slice(local_mem, 0, 1 << 20)}, {shared});
    REQUIRE(run(*p.initiator, w, p.target.get()).ok());
    CHECK(std::memcmp(shared.pointer(), local_mem.data(), local_mem.size()) == 0);

    std::memset(shared.pointer(), 0x5a, 4096);
    const auto r = create(*p.initiator, transfer_op::read, {slice(local_mem, 0, 4096)},
                          {descriptor{shared.address, 4096}});
    REQUIRE(run(*p.initiator, r, p.target.get()).ok());
    CHECK(std::all_of(local_mem.begin(), local_mem.begin() + 4096,
                      [](std::byte b) { return b == std::byte{0x5a}; }));
    REQUIRE(p.initiator->release(w).ok());
    REQUIRE(p.initiator->release(r).ok());
    CHECK(p.target->deregister_memory(shared).ok());
    CHECK(p.target->deregister_memory(shared).code() == status_code::not_found);
}

TEST_CASE("a transfer to an agent destroyed in the same process fails with an ERROR event") {
    temp_dir dir;
    {
        pair_fixture p(dir);
        std::vector<std::byte> remote_mem(1 << 20), local_mem(1 << 20);
        REQUIRE(
            p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
        REQUIRE(p.initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size()))
                    .ok());
        p.connect();
        const auto w = create(*p.initiator, transfer_op::write, {slice(local_mem, 0, 65536)},
                              {slice(remote_mem, 0, 65536)});
        REQUIRE(run(*p.initiator, w, p.target.get()).ok());

        p.target.reset();
        const auto first = p.initiator->post(w);
        CHECK(first.code() == status_code::remote_disconnected);
        CHECK_THAT(first.message(), Catch::Contains("'target'") && Catch::Contains("destroyed"));
        // Polling the failed transfer repeats its status without a new event; posting again is
        // a new failure.
        CHECK(p.initiator->poll(w).code() == status_code::remote_disconnected);
        CHECK(p.initiator->post(w).code() == status_code::remote_disconnected);
        transfer_handle again;
        CHECK(
            p.initiator->create_transfer(transfer_op::write, dv{}, dv{}, "target", again).code() ==
            status_code::remote_disconnected);
    }
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_error_remote_disconnected") == 3);
    CHECK(s.in_category(xtel::category::error) == 3);
    CHECK(s.count_of("agent_disconnect") == 1);
    CHECK(s.sum_of("agent_tx_bytes") == 65536);
}

TEST_CASE("a transfer in flight to an agent destroyed in the same process fails, not hangs") {
    temp_dir dir;
    pair_fixture p(dir);
    // Registered (not allocated) target memory: a write needs the target's help to complete,
    // so it is still in flight when the target goes.
    std::vector<std::byte> remote_mem(1 << 20), local_mem(1 << 20);
    REQUIRE(p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
    REQUIRE(
        p.initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size())).ok());
    p.connect();
    const auto w = create(*p.initiator, transfer_op::write, {slice(local_mem, 0, 1 << 20)},
                          {slice(remote_mem, 0, 1 << 20)});
    REQUIRE(p.initiator->post(w).code() == status_code::in_progress);
    p.target.reset();
    const auto st = wait_for(*p.initiator, w);
    CHECK(st.code() == status_code::remote_disconnected);
    CHECK(p.initiator->release(w).ok());
}

TEST_CASE("a transfer that outlives the agent's deadline fails with timed_out") {
    temp_dir dir;
    xtel::agent_options opts;
    opts.transfer_timeout = std::chrono::milliseconds(50);
    pair_fixture p(dir, opts);
    std::vector<std::byte> remote_mem(1 << 20), local_mem(1 << 20);
    REQUIRE(p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
    REQUIRE(
        p.initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size())).ok());
    p.connect();
    const auto w = create(*p.initiator, transfer_op::write, {slice(local_mem, 0, 1 << 20)},
                          {slice(remote_mem, 0, 1 << 20)});
    // The target never progresses, so the write cannot complete.
    REQUIRE(p.initiator->post(w).code() == status_code::in_progress);
    const auto start = std::chrono::steady_clock::now();
    const auto st = wait_for(*p.initiator, w);
    const auto waited = std::chrono::steady_clock::now() - start;
    CHECK(st.code() == status_code::timed_out);
    CHECK_THAT(st.message(), Catch::Contains("50 ms"));
    CHECK(waited >= std::chrono::milliseconds(50));
    CHECK(waited < std::chrono::seconds(5));
    // The connection was closed with it.
    CHECK(p.initiator->post(w).code() == status_code::timed_out);
}

TEST_CASE("bad requests come back as statuses naming the bad value, one ERROR event each") {
    temp_dir dir;
    {
        pair_fixture p(dir);
        std::vector<std::byte> remote_mem(65536), local_mem(65536), other(4096);
        const auto local_region = descriptor::dram(local_mem.data(), local_mem.size());
        REQUIRE(
            p.target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
        REQUIRE(p.initiator->register_memory(local_region).ok());
        p.connect();
        xtel::agent& a = *p.initiator;
        transfer_handle h;

        auto st =
            a.create_transfer(transfer_op::write, dv{local_region}, dv{local_region}, "nobody", h);
        CHECK(st.code() == status_code::not_found);
        CHECK_THAT(st.message(), Catch::Contains("'nobody'"));

        st = a.create_transfer(transfer_op::write, dv{slice(local_mem, 0, 8)},
                               dv{slice(remote_mem, 0, 8), slice(remote_mem, 8, 8)}, "target", h);
        CHECK(st.code() == status_code::invalid_argument);
        CHECK_THAT(st.message(), Catch::Contains("1 local, 2 remote"));

        st = a.create_transfer(transfer_op::write, dv{slice(local_mem, 0, 8)},
                               dv{slice(remote_mem, 0, 16)}, "target", h);
        CHECK(st.code() == status_code::invalid_argument);
        CHECK_THAT(st.message(), Catch::Contains("8 (local) and 16 (remote)"));

        const auto unregistered = descriptor::dram(other.data(), other.size());
        st = a.create_transfer(transfer_op::read, dv{unregistered}, dv{slice(remote_mem, 0, 4096)},
                               "target", h);
        CHECK(st.code() == status_code::not_found);
        CHECK_THAT(st.message(), Catch::Contains(fmt::format("{:#x}", unregistered.address)));

        // Past the end of the target's region by one byte.
        st = a.create_transfer(transfer_op::read, dv{slice(local_mem, 0, 4096)},
                               dv{slice(remote_mem, 65536 - 4095, 4096)}, "target", h);
        CHECK(st.code() == status_code::not_found);
        CHECK_THAT(st.message(), Catch::Contains("not within memory agent 'target' registered"));

        st = a.post(transfer_handle{12345});
        CHECK(st.code() == status_code::invalid_argument);
        CHECK_THAT(st.message(), Catch::Contains("0x3039"));
        CHECK(a.poll(transfer_handle{}).code() == status_code::invalid_argument);

        REQUIRE(a.create_transfer(transfer_op::write, dv{slice(local_mem, 0, 64)},
                                  dv{slice(remote_mem, 0, 64)}, "target", h)
                    .ok());
        CHECK(a.poll(h).code() == status_code::invalid_argument);  // not posted yet
        st = a.deregister_memory(local_region);
        CHECK(st.code() == status_code::busy);
        CHECK_THAT(st.message(), Catch::Contains("release them first"));
        CHECK(a.release(h).ok());
        CHECK(a.release(h).code() == status_code::invalid_argument);  // a stale handle

        st = a.register_memory(slice(local_mem, 4096, 4096));
        CHECK(st.code() == status_code::invalid_argument);
        CHECK_THAT(st.message(), Catch::Contains("overlaps"));
        CHECK(a.register_memory(descriptor::dram(other.data(), 0)).code() ==
              status_code::invalid_argument);
        CHECK(a.deregister_memory(unregistered).code() == status_code::not_found);
        CHECK(a.disconnect("nobody").code() == status_code::not_found);

        std::vector<std::byte> garbage(100, std::byte{7});
        std::string name;
        st = a.load_remote_metadata(garbage, name);
        CHECK(st.code() == status_code::bad_metadata);
        CHECK_THAT(st.message(), Catch::Contains("100 bytes"));

        // Nothing was lost: the memory is still registered and a good transfer still works.
        REQUIRE(a.create_transfer(transfer_op::write, dv{slice(local_mem, 0, 64)},
                                  dv{slice(remote_mem, 0, 64)}, "target", h)
                    .ok());
        CHECK(run(a, h, p.target.get()).ok());
    }
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.sum_of("agent_error_not_found") == 5);
    CHECK(s.sum_of("agent_error_invalid_argument") == 8);
    CHECK(s.sum_of("agent_error_busy") == 1);
    CHECK(s.sum_of("agent_error_bad_metadata") == 1);
    CHECK(s.in_category(xtel::category::error) == 15);
}

TEST_CASE("registering GPU memory where it cannot work is refused as not supported") {
    if (xtel::vram_support().ok()) {
        WARN("a CUDA device is present: the refusal is not testable here");
        return;
    }
    temp_dir dir;
    {
        auto a = xtel::make_agent("gpu", telemetry_config(dir));
        const descriptor vram{0x10000, 4096, xtel::memory_kind::vram, 0};
        const auto st = a->register_memory(vram);
        CHECK(st.code() == status_code::not_supported);
#if defined(XTEL_TEST_HAVE_CUDA)
        CHECK_THAT(st.message(), Catch::Contains("no CUDA device present"));
#else
        CHECK_THAT(st.message(), Catch::Contains("built without CUDA support"));
#endif
        CHECK_THAT(st.message(), Catch::Contains("0x10000"));
        descriptor out;
        CHECK(a->allocate_memory(0, out).code() == status_code::invalid_argument);
    }
    const auto s = summarize_file(dir.path() / "gpu");
    CHECK(s.sum_of("agent_error_not_supported") == 1);
    CHECK(s.count_of("agent_memory_registered") == 0);
}

TEST_CASE("reloading metadata makes newly registered memory usable over the same connection") {
    temp_dir dir;
    {
        pair_fixture p(dir);
        std::vector<std::byte> first(65536), second(65536), local_mem(65536);
        REQUIRE(p.target->register_memory(descriptor::dram(first.data(), first.size())).ok());
        REQUIRE(p.initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size()))
                    .ok());
        p.connect();
        REQUIRE(p.target->register_memory(descriptor::dram(second.data(), second.size())).ok());

        transfer_handle h;
        CHECK(p.initiator
                  ->create_transfer(transfer_op::write, dv{slice(local_mem, 0, 4096)},
                                    dv{slice(second, 0, 4096)}, "target", h)
                  .code() == status_code::not_found);
        p.connect();
        std::vector<descriptor> regions;
        REQUIRE(p.initiator->remote_regions("target", regions).ok());
        CHECK(regions.size() == 2);
        local_mem.assign(local_mem.size(), std::byte{9});
        h = create(*p.initiator, transfer_op::write, {slice(local_mem, 0, 4096)},
                   {slice(second, 0, 4096)});
        REQUIRE(run(*p.initiator, h, p.target.get()).ok());
        CHECK(second[4095] == std::byte{9});

        // After a disconnect the transfer fails when posted, and can be released.
        REQUIRE(p.initiator->disconnect("target").ok());
        CHECK(p.initiator->post(h).code() == status_code::remote_disconnected);
        CHECK(p.initiator->release(h).ok());
        CHECK(p.initiator->remote_regions("target", regions).code() == status_code::not_found);
    }
    const auto s = summarize_file(dir.path() / "initiator");
    CHECK(s.count_of("agent_connect") == 1);
    CHECK(s.count_of("agent_disconnect") == 1);
    CHECK(s.values_of("agent_connections") == std::vector<std::uint64_t>{1, 0});
}

TEST_CASE("an agent with telemetry off moves data and writes no flight recorder") {
    temp_dir dir;
    auto cfg = telemetry_config(dir);
    cfg.enabled = false;
    pair_fixture p(dir);
    auto off_target = xtel::make_agent("off_target", cfg);
    auto off = xtel::make_agent("off", cfg);
    CHECK_FALSE(off->telemetry_enabled());
    std::vector<std::byte> remote_mem(65536), local_mem = pattern(65536, 4);
    REQUIRE(
        off_target->register_memory(descriptor::dram(remote_mem.data(), remote_mem.size())).ok());
    REQUIRE(off->register_memory(descriptor::dram(local_mem.data(), local_mem.size())).ok());
    std::vector<std::byte> blob;
    REQUIRE(off_target->export_metadata(blob).ok());
    std::string name;
    REQUIRE(off->load_remote_metadata(blob, name).ok());
    transfer_handle h;
    REQUIRE(off->create_transfer(transfer_op::write, dv{descriptor::dram(local_mem.data(), 65536)},
                                 dv{descriptor::dram(remote_mem.data(), 65536)}, name, h)
                .ok());
    REQUIRE(run(*off, h, off_target.get()).ok());
    CHECK(remote_mem == local_mem);
    CHECK(off->stats().events_exported == 0);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "off"));
}

}  // namespace agent_transfer_test
