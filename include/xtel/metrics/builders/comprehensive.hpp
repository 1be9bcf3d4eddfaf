#pragma once
/// One series per combination of attributes: every registry entry is a label.

#include <string_view>
#include <vector>

#include "xtel/metrics/builder.hpp"

namespace xtel::metrics {

/// xtel_transfer_bytes_total and xtel_transfer_requests_total, labelled by every attribute of
/// the registry in its order (by default backend, operation, direction, local_memory,
/// remote_memory, remote_agent, status, gpu). Failed transfers count too, under their status.
class comprehensive_builder {
  public:
    static constexpr std::string_view name = "comprehensive";

    void setup(metric_store& store, const attribute_registry& registry) {
        bytes_ = store.add_family({"xtel_transfer_bytes_total",
                                   "Bytes moved by transfers this agent initiated (direction "
                                   "tx: its writes, rx: its reads), by every transfer "
                                   "attribute; a peer's transfers into or out of this agent's "
                                   "memory are not seen here.",
                                   metric_type::counter,
                                   registry.names(),
                                   0,
                                   {},
                                   "bytes"});
        requests_ = store.add_family({"xtel_transfer_requests_total",
                                      "Requests of transfers this agent initiated, by every "
                                      "transfer attribute.",
                                      metric_type::counter, registry.names()});
    }

    void build(const transfer_group& g, metric_store& store) {
        values_.clear();
        for (const field& f : g.data.fields) {
            values_.push_back(f.label);
        }
        store.add(bytes_, values_, g.totals.bytes);
        store.add(requests_, values_, g.totals.requests);
    }

  private:
    family_id bytes_ = 0;
    family_id requests_ = 0;
    std::vector<std::string_view> values_;  // reused: no allocation per group
};

}  // namespace xtel::metrics
