#pragma once
/// The NIXL metric names, for dashboards built on them: bytes and requests per direction,
/// without labels beyond those the exporter adds.

#include <string_view>

#include "xtel/metrics/builder.hpp"

namespace xtel::metrics {

/// agent_tx_bytes_total, agent_rx_bytes_total, agent_tx_requests_num_total,
/// agent_rx_requests_num_total: completed transfers only, as NIXL counts them; a failed
/// transfer is left out (the comprehensive builder shows it with status="error").
class legacy_builder {
  public:
    static constexpr std::string_view name = "legacy";

    void setup(metric_store& store, const attribute_registry& /*registry*/) {
        tx_bytes_ = make(store, "agent_tx_bytes_total", "Bytes the agent transmitted.");
        rx_bytes_ = make(store, "agent_rx_bytes_total", "Bytes the agent received.");
        tx_requests_ =
            make(store, "agent_tx_requests_num_total", "Transmit requests the agent completed.");
        rx_requests_ =
            make(store, "agent_rx_requests_num_total", "Receive requests the agent completed.");
    }

    void build(const transfer_group& g, metric_store& store) {
        if (g.attrs.status != transfer_status::success) {
            return;
        }
        const bool tx = g.dir == direction::tx;
        store.add(tx ? tx_bytes_ : rx_bytes_, {}, g.totals.bytes);
        store.add(tx ? tx_requests_ : rx_requests_, {}, g.totals.requests);
    }

  private:
    /// Each family has its one series from the start, at 0, as NIXL shows them.
    static family_id make(metric_store& store, std::string_view name, std::string_view help) {
        const family_id f =
            store.add_family({std::string(name), std::string(help), metric_type::counter, {}});
        store.add(f, {}, 0);
        return f;
    }

    family_id tx_bytes_ = 0;
    family_id rx_bytes_ = 0;
    family_id tx_requests_ = 0;
    family_id rx_requests_ = 0;
};

}  // namespace xtel::metrics
