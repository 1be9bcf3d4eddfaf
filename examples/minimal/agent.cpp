// examples/minimal/agent.cpp: two agents in one process, one writing 4 KiB into the other's
// memory over UCX, each with the telemetry NIXL_TELEMETRY_* ask for.
#include <cstddef>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/agent/agent.hpp"  // the agent interface and make_agent: no UCX, no exporter headers

namespace {
// Agent operations return a status and never throw: check every one.
void check(const xtel::status& st, const char* what) {
    if (!st.ok()) {
        throw std::runtime_error(std::string(what) + ": " + st.to_string());
    }
}
}  // namespace

int main(int argc, char** argv) try {
    if (argc > 1) {  // no options: the NIXL_TELEMETRY_* variables configure its telemetry
        const bool help =
            std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h";
        std::fprintf(help ? stdout : stderr,
                     "usage: %s (no options; NIXL_TELEMETRY_* configure it)\n", argv[0]);
        return help ? 0 : 2;
    }
    // The memory first: it must outlive the agents that register it.
    std::vector<std::byte> source(4096, std::byte{42}), destination(4096);
    auto target = xtel::make_agent("decode-0");  // NIXL_TELEMETRY_* decide the exporters
    auto initiator = xtel::make_agent("prefill-0");

    const auto local = xtel::descriptor::dram(source.data(), source.size());
    const auto shared = xtel::descriptor::dram(destination.data(), destination.size());
    check(initiator->register_memory(local), "register_memory");
    check(target->register_memory(shared), "register_memory");

    // The initiator loads the target's metadata, not the other way round (between processes,
    // the target sends the blob over a channel of yours).
    std::vector<std::byte> metadata;
    check(target->export_metadata(metadata), "export_metadata");
    std::string peer;
    check(initiator->load_remote_metadata(metadata, peer), "load_remote_metadata");
    std::vector<xtel::descriptor> remote;  // the regions the target announced, at its addresses
    check(initiator->remote_regions(peer, remote), "remote_regions");

    xtel::transfer_handle write;
    check(initiator->create_transfer(xtel::transfer_op::write, std::span(&local, 1), remote, peer,
                                     write),
          "create_transfer");
    xtel::status st = initiator->post(write);
    while (st.code() == xtel::status_code::in_progress) {
        target->progress();  // some transports need the target's help: progress it while waiting
        st = initiator->poll(write);
    }
    check(st, "write");
    check(initiator->release(write), "release");

    const bool same = source == destination;
    std::printf("%s wrote %zu bytes into %s: %s\n", initiator->name().c_str(), source.size(),
                peer.c_str(), same ? "verified" : "they differ");
    return same ? 0 : 1;
} catch (const xtel::config_error& e) {  // a NIXL_TELEMETRY_* variable with a bad value
    std::fprintf(stderr, "configuration: %s\n", e.what());
    return 2;
} catch (const std::exception& e) {  // a failed operation, or UCX that would not start
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
