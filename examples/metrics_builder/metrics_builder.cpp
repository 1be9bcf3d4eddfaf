// A user's metrics builder: failed transfers per peer and operation, for an alert such as
//
//     increase(app_failed_transfers_total[5m]) > 0
//
// The builder is added to the metric model of a real agent, which its Prometheus exporter
// serves; the agent then moves data to a peer in this process over UCX; the peer goes away, the
// next transfers fail, and the builder counts them. The program prints the series a scrape of
// /metrics shows and exits with 0 when the count is what happened (2 failures), so the test
// suite runs it as well.
//
//     metrics_builder_example          (NIXL_TELEMETRY_PROMETHEUS_ADDRESS, default 127.0.0.1:0)

#include <stdlib.h>

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/metrics/builder.hpp"

namespace {

using namespace xtel::metrics;

/// Runs on the telemetry flusher thread, once per group of transfers that share attributes in
/// a flush (never on a transfer's path), with the group's sums.
class failed_transfers_builder : public builder {
  public:
    std::string_view name() const noexcept override { return "failed_transfers"; }

    void setup(metric_store& store, const attribute_registry& /*registry*/) override {
        family_ = store.add_family({"app_failed_transfers_total",
                                    "Transfers that failed, by peer and operation.",
                                    metric_type::counter,
                                    {"peer", "operation"}});
    }

    void build(const transfer_group& g, metric_store& store) override {
        if (g.attrs.status == xtel::transfer_status::success) {
            return;
        }
        // Labels from the normalized data: values as given, and "unknown" when the registry has no
        // such attribute.
        store.add(family_, {label(g, "remote_agent"), label(g, "operation")}, g.totals.transfers);
    }

  private:
    static std::string_view label(const transfer_group& g, std::string_view attribute) {
        const field* f = g.data.find(attribute);
        return f != nullptr ? std::string_view(f->label) : std::string_view("unknown");
    }

    family_id family_ = 0;
};

void check(const xtel::status& st, std::string_view what) {
    if (!st.ok()) {
        throw std::runtime_error(fmt::format("{}: {}", what, st.to_string()));
    }
}

/// Posts and polls until the transfer is no longer in progress, progressing the peer too.
xtel::status run(xtel::agent& a, xtel::transfer_handle h, xtel::agent& peer) {
    xtel::status st = a.post(h);
    while (st.code() == xtel::status_code::in_progress) {
        peer.progress();
        st = a.poll(h);
    }
    return st;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) {  // no options: the NIXL_TELEMETRY_* variables configure its telemetry
        const bool help =
            std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h";
        std::fprintf(help ? stdout : stderr,
                     "usage: %s (no options; NIXL_TELEMETRY_* configure it)\n", argv[0]);
        return help ? 0 : 2;
    }
    try {
        ::setenv("NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "127.0.0.1:0", 0);
        xtel::config cfg;
        cfg.enabled = true;
        cfg.exporters = {"prometheus"};
        xtel::basic_agent<xtel::prometheus_telemetry> initiator("prefill-0", cfg);
        // The agent's metric model, which its exporters serve: its builders feed every one.
        initiator.telemetry().metric_state().add_builder(
            std::make_unique<failed_transfers_builder>());

        auto peer = xtel::make_agent("Decode-0", xtel::config{});
        std::vector<std::byte> remote(1 << 16), local(1 << 16);
        check(peer->register_memory(xtel::descriptor::dram(remote.data(), remote.size())),
              "register peer memory");
        check(initiator.register_memory(xtel::descriptor::dram(local.data(), local.size())),
              "register local memory");
        std::vector<std::byte> blob;
        check(peer->export_metadata(blob), "export metadata");
        std::string peer_name;
        check(initiator.load_remote_metadata(blob, peer_name), "load metadata");

        const std::vector l{xtel::descriptor::dram(local.data(), 4096)};
        const std::vector r{xtel::descriptor::dram(remote.data(), 4096)};
        xtel::transfer_handle write;
        check(initiator.create_transfer(xtel::transfer_op::write, l, r, peer_name, write),
              "create transfer");
        for (int i = 0; i < 4; ++i) {
            check(run(initiator, write, *peer), "write");
        }
        peer.reset();  // the peer goes away: the next two writes fail
        for (int i = 0; i < 2; ++i) {
            const auto st = initiator.post(write);
            fmt::print("write after the peer left: {}\n", st.to_string());
        }
        initiator.flush_telemetry();

        const auto& exporter = initiator.telemetry().get<xtel::prometheus_exporter>();
        const std::string text = exporter.scrape();
        std::uint64_t failed = 0;
        fmt::print("http://{}/metrics shows:\n", exporter.address());
        for (std::size_t pos = 0; pos < text.size();) {
            const auto end = text.find('\n', pos);
            const std::string_view line(text.data() + pos, end - pos);
            if (line.starts_with("app_failed_transfers_total{") ||
                line.starts_with("xtel_transfer_bytes_total{")) {
                fmt::print("  {}\n", line);
                if (line.starts_with("app_failed_transfers_total{")) {
                    failed += std::stoull(std::string(line.substr(line.rfind(' ') + 1)));
                }
            }
            pos = end + 1;
        }
        fmt::print("failed transfers counted by the user's builder: {}\n", failed);
        return failed == 2 ? 0 : 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "metrics_builder_example: {}\n", e.what());
        return 1;
    }
}
