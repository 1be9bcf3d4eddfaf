// Notifications (docs/notifications.md): a message the initiator attaches to a transfer, which
// reaches the target after the transfer's data, a standalone one, and what the target does
// with one that is malformed. Real agents over UCX, in this process and in two xfer_demo
// processes.

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "agent_support.hpp"
#include "xtel/agent/basic_agent.hpp"

namespace notification_test {

using namespace agent_test;
using xtel::descriptor;
using xtel::notification;
using xtel::transfer_handle;
using xtel::transfer_op;

namespace {

std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    std::vector<std::byte> v(n);
    demo_fill(v.data(), n, seed);
    return v;
}

/// Connects `initiator` to `target` (named "target").
void connect(xtel::agent& initiator, xtel::agent& target) {
    std::vector<std::byte> blob;
    REQUIRE(target.export_metadata(blob).ok());
    std::string name;
    REQUIRE(initiator.load_remote_metadata(blob, name).ok());
    REQUIRE(name == "target");
}

/// Polls `target` until it holds `n` notifications (progressing `other`, whose sends may wait
/// for it), failing after 10 s. `on_each` sees each as it arrives.
template <class F>
std::vector<notification> await(xtel::agent& target, xtel::agent& other, std::size_t n, F on_each) {
    std::vector<notification> got, batch;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < n) {
        batch.clear();
        REQUIRE(target.get_notifications(batch).ok());
        for (auto& x : batch) {
            on_each(x);
            got.push_back(std::move(x));
        }
        other.progress();
        if (std::chrono::steady_clock::now() > give_up) {
            FAIL("got " << got.size() << " of " << n << " notifications within 10 s");
        }
    }
    return got;
}

std::vector<notification> await(xtel::agent& target, xtel::agent& other, std::size_t n) {
    return await(target, other, n, [](const notification&) {});
}

}  // namespace

TEST_CASE("a notified write reaches the target after its data, saying what it moved",
          "[notification]") {
    temp_dir dir;
    const auto cfg = telemetry_config(dir);
    auto target = xtel::make_agent("target", cfg);
    auto initiator = xtel::make_agent("initiator", cfg);
    // Memory from the target's heap: the write is in flight after its post, so the
    // notification waits for the poll that sees the flush complete.
    constexpr std::size_t size = 1 << 20;
    std::vector<std::byte> remote_mem(size), local_mem = pattern(size, 5);
    REQUIRE(target->register_memory(descriptor::dram(remote_mem.data(), size)).ok());
    REQUIRE(initiator->register_memory(descriptor::dram(local_mem.data(), size)).ok());
    connect(*initiator, *target);

    const std::vector<descriptor> local{descriptor::dram(local_mem.data(), size / 2),
                                        descriptor::dram(local_mem.data() + size / 2, size / 2)};
    const std::vector<descriptor> remote{descriptor::dram(remote_mem.data(), size / 2),
                                         descriptor::dram(remote_mem.data() + size / 2, size / 2)};
    transfer_handle h;
    REQUIRE(initiator
                ->create_transfer(
                    transfer_op::write, local, remote, "target", h,
                    {.request_id = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                     .notify = true,
                     .notification = "kv blocks 0-1"})
                .ok());
    REQUIRE(run(*initiator, h, target.get()).ok());
    bool data_in_place = false;
    const auto got = await(*target, *initiator, 1, [&](const notification&) {
        data_in_place = remote_mem == local_mem;  // what the target sees when it learns
    });
    CHECK(data_in_place);
    const notification& n = got.front();
    CHECK(n.remote_agent == "initiator");
    CHECK(n.message == "kv blocks 0-1");
    CHECK(n.transfer);
    CHECK(n.op == transfer_op::write);
    CHECK(n.descriptors == 2);
    CHECK(n.bytes == size);
    CHECK(n.traced);
    CHECK(n.trace_id[0] == 0x4b);
    CHECK(n.span_id[1] == 0xf0);
    CHECK(initiator->notifications().sent == 1);
    CHECK(target->notifications().received == 1);
    CHECK(initiator->release(h).ok());
}

TEST_CASE("each completion of a notified transfer notifies once, and others not at all",
          "[notification]") {
    temp_dir dir;
    const auto cfg = telemetry_config(dir);
    auto target = xtel::make_agent("target", cfg);
    auto initiator = xtel::make_agent("initiator", cfg);
    descriptor remote;
    REQUIRE(target->allocate_memory(1 << 16, remote).ok());  // completes inside the post
    std::vector<std::byte> local_mem(1 << 16);
    REQUIRE(initiator->register_memory(descriptor::dram(local_mem.data(), local_mem.size())).ok());
    connect(*initiator, *target);
    const std::vector<descriptor> l{descriptor::dram(local_mem.data(), 4096)};
    const std::vector<descriptor> r{descriptor{remote.address, 4096}};
    transfer_handle quiet, notified;
    REQUIRE(initiator->create_transfer(transfer_op::read, l, r, "target", quiet).ok());
    REQUIRE(
        initiator->create_transfer(transfer_op::read, l, r, "target", notified, {.notify = true})
            .ok());
    for (int i = 0; i < 5; ++i) {
        REQUIRE(run(*initiator, quiet, target.get()).ok());
        REQUIRE(run(*initiator, notified, target.get()).ok());
    }
    const auto got = await(*target, *initiator, 5);
    for (int i = 0; i < 100; ++i) {  // anything more would have arrived by now
        initiator->progress();
        std::vector<notification> more;
        REQUIRE(target->get_notifications(more).ok());
        REQUIRE(more.empty());
    }
    CHECK(std::all_of(got.begin(), got.end(), [](const notification& n) {
        return n.transfer && n.op == transfer_op::read && n.bytes == 4096 && n.message.empty() &&
               !n.traced;
    }));
    CHECK(initiator->notifications().sent == 5);
}

TEST_CASE("a standalone notification carries its message and no transfer", "[notification]") {
    temp_dir dir;
    const auto cfg = telemetry_config(dir);
    auto target = xtel::make_agent("target", cfg);
    auto initiator = xtel::make_agent("initiator", cfg);
    connect(*initiator, *target);
    REQUIRE(initiator->send_notification("target", "prefill of request 9 done").ok());
    const auto got = await(*target, *initiator, 1);
    CHECK(got.front().remote_agent == "initiator");
    CHECK(got.front().message == "prefill of request 9 done");
    CHECK_FALSE(got.front().transfer);
    CHECK(got.front().bytes == 0);
}

TEST_CASE("a notification over 4096 bytes is refused, naming the limit", "[notification]") {
    temp_dir dir;
    const auto cfg = telemetry_config(dir);
    auto target = xtel::make_agent("target", cfg);
    auto initiator = xtel::make_agent("initiator", cfg);
    connect(*initiator, *target);
    const std::string big(xtel::max_notification + 1, 'x');
    const auto st = initiator->send_notification("target", big);
    CHECK(st.code() == xtel::status_code::invalid_argument);
    CHECK(st.message().find("4097 bytes is too long (at most 4096 bytes)") != std::string::npos);
    CHECK(initiator->send_notification("target", big.substr(1)).ok());
    CHECK(initiator->send_notification("nobody", "x").code() == xtel::status_code::not_found);
}

TEST_CASE("a malformed notification is dropped, counted and logged once; the target goes on",
          "[notification]") {
    xtel_test::log_capture logs;
    temp_dir dir;
    auto target = xtel::make_agent("target", telemetry_config(dir));
    // An agent whose backend sends raw bytes the way a notification goes.
    xtel::basic_agent<xtel::telemetry<>> sender("sender", xtel::config{});
    connect(sender, *target);
    const std::vector<std::byte> junk{std::byte{'x'}, std::byte{'n'}, std::byte{9}};
    std::vector<std::byte> liar(48, std::byte{0});
    liar[0] = std::byte{'x'};
    liar[1] = std::byte{'n'};
    liar[2] = std::byte{1};
    liar[5] = std::byte{48};
    liar[6] = std::byte{200};    // a sender of 200 bytes
    liar[10] = std::byte{0xff};  // and a message of 16 MiB, neither there
    REQUIRE(sender.backend().send_raw_notification("target", junk).ok());
    REQUIRE(sender.backend().send_raw_notification("target", liar).ok());
    REQUIRE(sender.send_notification("target", "still here").ok());
    const auto got = await(*target, sender, 1);
    CHECK(got.front().message == "still here");
    CHECK(target->notifications().malformed == 2);
    CHECK(target->notifications().received == 1);
    const auto warnings = logs.at(xtel::log_level::warning);
    CHECK(std::count_if(warnings.begin(), warnings.end(), [](const std::string& m) {
              return m.find("malformed notification") != std::string::npos;
          }) == 1);
    CHECK(std::any_of(warnings.begin(), warnings.end(), [](const std::string& m) {
        return m.find(
                   "dropped a malformed notification of 3 bytes: shorter than the 48-byte "
                   "header") != std::string::npos;
    }));
}

#if defined(XTEL_XFER_DEMO)
TEST_CASE("xfer_demo --notify: the target counts one notification per transfer the initiator made",
          "[notification]") {
    temp_dir dir;
    const auto md = (dir / "md").string();
    const std::vector<std::string> common{"--metadata", md,         "--total",   "1M", "--block",
                                          "64K",        "--notify", "--timeout", "20"};
    std::vector<std::string> target_args{XTEL_XFER_DEMO, "--role", "target", "--target-memory",
                                         "registered"};
    target_args.insert(target_args.end(), common.begin(), common.end());
    const pid_t target = xtel_test::spawn(target_args, dir / "target.out", dir / "target.err");
    std::vector<std::string> initiator_args{XTEL_XFER_DEMO, "--role", "initiator"};
    initiator_args.insert(initiator_args.end(), common.begin(), common.end());
    const auto initiator = xtel_test::run(initiator_args);
    int status = 0;
    ::waitpid(target, &status, 0);
    const std::string out = xtel_test::read_file(dir / "target.out");
    INFO("initiator:\n"
         << initiator.out << initiator.err << "target:\n"
         << out << xtel_test::read_file(dir / "target.err"));
    REQUIRE(initiator.exit_code == 0);
    CHECK(initiator.out.find("notified 'xfer_target' of 32 transfers, 2097152 bytes") !=
          std::string::npos);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // 16 reads and 16 writes of 64 KiB.
    CHECK(out.find("target: 'xfer_initiator' notified 32 transfers, 2097152 bytes (it announced "
                   "32 transfers, 2097152 bytes)") != std::string::npos);
    CHECK(out.find("target: notified of 32 transfers, 2097152 bytes by 1 initiators; 0 "
                   "malformed; one per transfer") != std::string::npos);
}
#endif

}  // namespace notification_test
