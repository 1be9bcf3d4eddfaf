// The model's fold of transfers their producer summed (transfer_tally): the same families as
// the records' fold (agent_transfers.cpp), from sums and bucket counts.
#include <fmt/format.h>

#include "xtel/metrics/agent_metrics.hpp"

namespace xtel::metrics {

void agent_metrics::apply_tallies(std::span<const transfer_tally> tallies,
                                  const label_table& labels) {
    const std::lock_guard lock(state_mutex_);
    if (tallies.empty()) {
        return;
    }
    const std::size_t buckets = latency_bounds_.size() + 1;
    for (const transfer_tally& t : tallies) {
        if (t.timed == 0) {
            continue;
        }
        if (!tally_latency_ || t.xfer_buckets.size() != buckets ||
            t.post_buckets.size() != buckets) {
            throw metrics_error(fmt::format(
                "a transfer tally with {} timed transfers and {} and {} bucket counts: the "
                "latency histograms {}",
                t.timed, t.xfer_buckets.size(), t.post_buckets.size(),
                tally_latency_ ? fmt::format("take {} counts", buckets)
                               : std::string("take no counts by bucket (native buckets)")));
        }
    }
    processor_->process(tallies, labels);
    auto& store = processor_->store();
    for (const transfer_tally& t : tallies) {
        if (t.transfers == 0) {
            continue;
        }
        if (t.last_bytes > 0) {
            store.set(t.dir == direction::tx ? tx_last_bytes_ : rx_last_bytes_, t.last_bytes);
        }
        if (t.timed == 0) {
            continue;
        }
        peer_latency& p = latency_series(t.attrs, labels);
        store.add_observations(xfer_time_us_, t.xfer_buckets, t.xfer_us);
        store.add_observations(p.duration, t.xfer_buckets, t.xfer_us);
        store.add_observations(post_time_us_, t.post_buckets, t.post_us);
        store.add_observations(p.post, t.post_buckets, t.post_us);
        store.add(xfer_time_total_, t.xfer_us);
        store.add(post_time_total_, t.post_us);
        store.set(xfer_time_last_, t.last_xfer_us);
        store.set(post_time_last_, t.last_post_us);
    }
}

}  // namespace xtel::metrics
