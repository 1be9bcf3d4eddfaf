#pragma once
/// The NIXL metric names, for dashboards built on them: bytes and requests per direction,
/// labelled, as upstream NIXL labels them, by the agent's `hostname` (with the `agent_name` the
/// exporter adds).

#include <string_view>

#include "xtel/metrics/builder.hpp"

namespace xtel::metrics {

/// agent_tx_bytes_total, agent_rx_bytes_total, agent_tx_requests_num_total,
/// agent_rx_requests_num_total: completed transfers only, as NIXL counts them; a failed
/// transfer is left out (the comprehensive builder shows it under its error kind). Help texts
/// are upstream NIXL's.
class legacy_builder {
  public:
    static constexpr std::string_view name = "legacy";

    void setup(metric_store& store, const attribute_registry& /*registry*/) {
        tx_bytes_ = make(store, "agent_tx_bytes_total", "Number of bytes sent by the agent");
        rx_bytes_ = make(store, "agent_rx_bytes_total", "Number of bytes received by the agent");
        tx_requests_ =
            make(store, "agent_tx_requests_num_total", "Number of requests sent by the agent");
        rx_requests_ =
            make(store, "agent_rx_requests_num_total", "Number of requests received by the agent");
    }

    void build(const transfer_group& g, metric_store& store) {
        if (g.attrs.status != transfer_status::success) {
            return;
        }
        const bool tx = g.dir == direction::tx;
        const std::string_view host = g.ctx.hostname;
        store.add(tx ? tx_bytes_ : rx_bytes_, {host}, g.totals.bytes);
        store.add(tx ? tx_requests_ : rx_requests_, {host}, g.totals.requests);
    }

  private:
    /// The series appears with the first transfer (the Prometheus exporter makes it at 0 from
    /// the start, as NIXL shows it).
    static family_id make(metric_store& store, std::string_view name, std::string_view help) {
        family_spec spec{std::string(name), std::string(help), metric_type::counter, {"hostname"}};
        spec.fixed_labels = true;  // one host name
        return store.add_family(std::move(spec));
    }

    family_id tx_bytes_ = 0;
    family_id rx_bytes_ = 0;
    family_id tx_requests_ = 0;
    family_id rx_requests_ = 0;
};

}  // namespace xtel::metrics
