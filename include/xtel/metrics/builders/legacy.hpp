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
     .help = "Number of bytes sent by the agent",
     .dir = direction::tx,
     .bytes = true},
    {.name = "agent_rx_bytes_total",
     .help = "Number of bytes received by the agent",
     .dir = direction::rx,
     .bytes = true},
    {.name = "agent_tx_requests_num_total",
     .help = "Number of requests sent by the agent",
     .dir = direction::tx},
    {.name = "agent_rx_requests_num_total",
     .help = "Number of requests received by the agent",
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
