#pragma once
// One NIXL agent's xtel metric model fed NIXL's events by a reader of NIXL's files (its BUFFER
// rings, its prometheus_mp stores), and its snapshot as xtel-exporter serves it: the events are
// mapped as the plug-in maps a flush (nixl/event_mapping.hpp).

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nixl/event_mapping.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/nixl/abi_v2.hpp"

namespace xtel::nixl {

class event_model {
  public:
    /// Throws what agent_metrics' constructor throws.
    event_model(std::string agent_name, const metrics::agent_metrics_settings& settings);

    /// Folds one batch of NIXL's events, in NIXL's order, into the model and publishes it.
    void apply(std::span<const abi_v2::event> events);

    /// The model's latest snapshot as a node file's reader serves it: without the labels a
    /// reader adds itself (the model's xtel_agent_info names this process's pid, not the
    /// agent's, which NIXL's files may not say), and with only the families `globs` choose
    /// (none: all). Made again only when the model published another, so that an unchanged
    /// agent keeps its pointer and a shared body stays shared.
    std::shared_ptr<const metrics::snapshot> served(const std::vector<std::string>& globs);

  private:
    metrics::agent_metrics model_;
    /// NIXL's events name no peer: the table holds none but `unknown`.
    label_table labels_{16};
    mapped_flush mapped_;
    std::shared_ptr<const metrics::snapshot> published_;
    std::shared_ptr<const metrics::snapshot> served_;
};

}  // namespace xtel::nixl
