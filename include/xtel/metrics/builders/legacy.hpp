#pragma once
/// The NIXL metric names, for dashboards built on them: bytes and requests per direction,
/// labelled, as upstream NIXL labels them, by the agent's `hostname` (with the `agent_name` the
/// exporter adds).

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

#include "xtel/metrics/builder.hpp"

namespace xtel::metrics {

/// One of NIXL's counters: a direction's bytes or requests.
struct legacy_counter {
    std::string_view name;
    std::string_view help;
    direction dir = direction::tx;
    bool bytes = false;  ///< bytes, else requests
};
/// NIXL's counter names and help texts, written here only (the legacy builder counts them; the
/// agent's model makes them at 0 from the start, as NIXL shows them).
inline constexpr legacy_counter legacy_counters[] = {
    {.name = "agent_tx_bytes_total",
     .help =
         "Bytes of the WRITEs this agent initiated that completed; a peer's transfers into or out "
         "of this agent's memory are counted by the peer",
     .dir = direction::tx,
     .bytes = true},
    {.name = "agent_rx_bytes_total",
     .help = "Bytes of the READs this agent initiated that completed; bytes a peer wrote into this "
             "agent's memory are not counted here (transfers are one-sided)",
     .dir = direction::rx,
     .bytes = true},
    {.name = "agent_tx_requests_num_total",
     .help = "Completed WRITE requests this agent initiated",
     .dir = direction::tx},
    {.name = "agent_rx_requests_num_total",
     .help = "Completed READ requests this agent initiated",
     .dir = direction::rx},
};

/// agent_tx_bytes_total, agent_rx_bytes_total, agent_tx_requests_num_total,
/// agent_rx_requests_num_total: completed transfers only, as NIXL counts them; a failed
/// transfer is left out (the comprehensive builder shows it under its error kind). Help texts
/// are upstream NIXL's.
class legacy_builder {
  public:
    static constexpr std::string_view name = "legacy";

    void setup(metric_store& store, const attribute_registry& /*registry*/) {
        for (std::size_t i = 0; i < std::size(legacy_counters); ++i) {
            family_spec spec{std::string(legacy_counters[i].name),
                             std::string(legacy_counters[i].help),
                             metric_type::counter,
                             {"hostname"}};
            spec.fixed_labels = true;  // one host name
            ids_[i] = store.add_family(std::move(spec));
        }
    }

    void build(const transfer_group& g, metric_store& store) {
        if (g.attrs.status != transfer_status::success) {
            return;
        }
        const std::string_view host = g.ctx.hostname;
        for (std::size_t i = 0; i < std::size(legacy_counters); ++i) {
            if (legacy_counters[i].dir == g.dir) {
                store.add(ids_[i], {host},
                          legacy_counters[i].bytes ? g.totals.bytes : g.totals.requests);
            }
        }
    }

  private:
    family_id ids_[std::size(legacy_counters)] = {};
};

}  // namespace xtel::metrics
