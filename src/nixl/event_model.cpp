#include "nixl/event_model.hpp"

#include <algorithm>
#include <utility>

#include "xtel/core/clock.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel::nixl {

namespace {

/// Whether one of `globs` matches `family`; true when there are none.
bool chosen(const std::vector<std::string>& globs, std::string_view family) {
    return globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
               return metrics::glob_matches(g, family);
           });
}

}  // namespace

event_model::event_model(std::string agent_name, const metrics::agent_metrics_settings& settings)
    : model_(std::move(agent_name), settings) {}

void event_model::apply(std::span<const abi_v2::event> events) {
    mapped_.clear();
    map_flush(events, clock::now_us(), mapped_);
    if (!mapped_.transfers.empty()) {
        model_.apply_transfers(mapped_.transfers, labels_);
    }
    if (!mapped_.events.empty()) {
        model_.apply(mapped_.events);
    }
    model_.publish();
}

std::shared_ptr<const metrics::snapshot> event_model::served(
    const std::vector<std::string>& globs) {
    auto latest = model_.latest();
    if (latest != published_) {
        std::vector<std::byte> encoded;
        metrics::encode_snapshot(*latest, encoded, metrics::reserved_label_names);
        metrics::snapshot s = metrics::decode_snapshot(encoded);
        std::erase_if(s.families, [&](const metrics::family_snapshot& f) {
            return !chosen(globs, f.spec.name);
        });
        served_ = std::make_shared<const metrics::snapshot>(std::move(s));
        published_ = std::move(latest);
    }
    return served_;
}

}  // namespace xtel::nixl
