// The model's fold of a round's transfer records: the notified ones counted apart, the rest
// through the processor's builders, and the completed ones into the latency histograms, their
// last values and their exemplars.
#include <algorithm>
#include <optional>

#include "xtel/metrics/agent_metrics.hpp"

namespace xtel::metrics {

void agent_metrics::apply_transfers(std::span<const transfer_record> transfers,
                                    const label_table& labels,
                                    std::span<const transfer_trace> traces) {
    const std::lock_guard lock(state_mutex_);
    if (transfers.empty()) {
        return;
    }
    const std::span<const transfer_record> own = count_notified(transfers, labels);
    if (own.empty()) {
        return;
    }
    processor_->process(own, labels);
    observe_completed(transfers, labels, traces);
}

std::span<const transfer_record> agent_metrics::count_notified(
    std::span<const transfer_record> transfers, const label_table& labels) {
    // The split is here, not in the pipeline: the span recorder needs the notified records in
    // the same round as the rest, and every family and builder of transfers is fed from here.
    // A round without notified records (an initiator's) is passed on as it came, uncopied.
    const bool mixed = std::any_of(transfers.begin(), transfers.end(),
                                   [](const transfer_record& r) { return r.notified; });
    if (!mixed) {
        return transfers;
    }
    auto& store = processor_->store();
    own_transfers_.clear();
    for (const transfer_record& r : transfers) {
        if (!r.notified) {
            own_transfers_.push_back(r);
            continue;
        }
        const std::string_view op = to_string(r.attrs.op);
        const std::string_view peer = peer_name(r.attrs.remote_agent, labels);
        store.add(store.series_of(notified_transfers_, {op, peer}), r.requests);
        store.add(store.series_of(notified_bytes_, {op, peer}), r.bytes);
    }
    return own_transfers_;
}

agent_metrics::peer_latency& agent_metrics::find_latency_series(const transfer_attributes& a,
                                                                const label_table& labels) {
    const label_id id = a.remote_agent;
    if (id >= peer_latency_.size()) {
        peer_latency_.resize(static_cast<std::size_t>(id) + 1);
    }
    peer_latency& p = peer_latency_[id][a.op == transfer_op::read ? 0 : 1];
    if (!p.found) {
        auto& store = processor_->store();
        const std::string_view op = to_string(a.op);
        const std::string_view peer = peer_name(id, labels);
        p.duration = store.series_of(duration_, {op, peer});
        p.post = store.series_of(post_duration_, {op, peer});
        p.found = true;
    }
    return p;
}

bool agent_metrics::tallies_latency() const {
    const auto families = processor_->store().families();
    const family_spec& first = families[xfer_time_us_.family].spec();
    const auto same_shape = [&](const series_ref s) {
        const family_spec& spec = families[s.family].spec();
        return spec.type == metric_type::histogram && !spec.native && spec.bounds == first.bounds;
    };
    return same_shape(xfer_time_us_) && same_shape(post_time_us_) &&
           same_shape(series_ref{duration_, 0}) && same_shape(series_ref{post_duration_, 0});
}

void agent_metrics::tally(peer_latency& p, const transfer_record& r, std::size_t index) {
    latency_tally& t = p.tally;
    const auto& store = processor_->store();
    if (!t.touched) [[unlikely]] {
        const std::size_t buckets = store.families()[xfer_time_us_.family].spec().bounds.size() + 1;
        t.xfer.resize(buckets);
        t.post.resize(buckets);
        t.last_tagged.resize(buckets);
        last_tagged_.resize(buckets);
        t.touched = true;
        tallied_.push_back(static_cast<std::size_t>(r.attrs.remote_agent) * 2 +
                           (r.attrs.op == transfer_op::read ? 0 : 1));
    }
    // The four histograms share their bounds (tallies_latency): a value's bucket, found in
    // one, is its bucket in all four.
    const std::size_t bucket = store.bucket_index(xfer_time_us_, r.xfer_us);
    ++t.xfer[bucket];
    ++t.post[store.bucket_index(xfer_time_us_, r.post_us)];
    t.xfer_sum += r.xfer_us;
    t.post_sum += r.post_us;
    // The bucket's exemplar is the last tagged transfer's in it: its index noted here, with the
    // bucket at hand, instead of a second walk that finds every transfer's bucket again.
    if (!r.request_id.empty()) {
        t.last_tagged[bucket] = index + 1;
        last_tagged_[bucket] = index + 1;
    }
}

void agent_metrics::add_tallies() {
    auto& store = processor_->store();
    for (const std::size_t at : tallied_) {
        peer_latency& p = peer_latency_[at / 2][at % 2];
        latency_tally& t = p.tally;
        store.add_observations(xfer_time_us_, t.xfer, t.xfer_sum);
        store.add_observations(p.duration, t.xfer, t.xfer_sum);
        store.add_observations(post_time_us_, t.post, t.post_sum);
        store.add_observations(p.post, t.post, t.post_sum);
        std::fill(t.xfer.begin(), t.xfer.end(), 0);
        std::fill(t.post.begin(), t.post.end(), 0);
        t.xfer_sum = t.post_sum = 0;
        t.touched = false;
    }
    tallied_.clear();
}

void agent_metrics::observe_completed(std::span<const transfer_record> transfers,
                                      const label_table& labels,
                                      std::span<const transfer_trace> traces) {
    auto& store = processor_->store();
    // The histograms need each value, which the processor's groups sum away: one observation
    // per completed transfer whose times were measured (config::timing_sample). The totals and
    // last values are set once for the round, as its last transfer leaves them.
    std::optional<std::uint64_t> last_bytes[2];  // by direction: tx, rx
    const transfer_record* last_timed = nullptr;
    std::uint64_t xfer_sum = 0, post_sum = 0;
    bool tagged = false;
    for (std::size_t i = 0; i < transfers.size(); ++i) {
        const transfer_record& r = transfers[i];
        if (r.notified || r.attrs.status != transfer_status::success) {
            continue;
        }
        if (r.requests > 0) {
            last_bytes[r.dir == direction::tx ? 0 : 1] = r.bytes / r.requests;
        }
        if (!r.timed) {
            continue;
        }
        last_timed = &r;
        xfer_sum += r.xfer_us;
        post_sum += r.post_us;
        peer_latency& series = latency_series(r.attrs, labels);
        tagged = tagged || !r.request_id.empty();
        if (tally_latency_) [[likely]] {
            tally(series, r, i);
            continue;
        }
        store.observe(xfer_time_us_, r.xfer_us);
        store.observe(series.duration, r.xfer_us);
        store.observe(post_time_us_, r.post_us);
        store.observe(series.post, r.post_us);
    }
    if (tagged && tally_latency_) {
        keep_tallied_exemplars(transfers, traces);
    }
    add_tallies();
    if (last_bytes[0]) {
        store.set(tx_last_bytes_, *last_bytes[0]);
    }
    if (last_bytes[1]) {
        store.set(rx_last_bytes_, *last_bytes[1]);
    }
    if (last_timed != nullptr) {
        store.add(xfer_time_total_, xfer_sum);
        store.add(post_time_total_, post_sum);
        store.set(xfer_time_last_, last_timed->xfer_us);
        store.set(post_time_last_, last_timed->post_us);
    }
    if (tagged && !tally_latency_) {
        keep_last_exemplars(transfers, labels, traces);
    }
}

void agent_metrics::keep_tallied_exemplars(std::span<const transfer_record> transfers,
                                           std::span<const transfer_trace> traces) {
    for (const std::size_t at : tallied_) {
        peer_latency& p = peer_latency_[at / 2][at % 2];
        keep_bucket_exemplars(p.duration, p.tally.last_tagged, transfers, traces);
    }
    keep_bucket_exemplars(xfer_time_us_, last_tagged_, transfers, traces);
}

void agent_metrics::keep_bucket_exemplars(series_ref s,
                                          std::vector<std::size_t>& last_tagged,
                                          std::span<const transfer_record> transfers,
                                          std::span<const transfer_trace> traces) {
    auto& store = processor_->store();
    for (std::size_t& at : last_tagged) {
        if (at == 0) {
            continue;
        }
        const std::size_t i = at - 1;
        at = 0;
        const transfer_record& r = transfers[i];
        // A view: the bucket's exemplar copies it into memory it keeps.
        metrics::exemplar_view ex("request_id", r.request_id, r.timestamp_us);
        // The traces are in order of index, one at most a record.
        const auto trace = std::lower_bound(
            traces.begin(), traces.end(), i,
            [](const transfer_trace& t, std::size_t index) { return t.index < index; });
        if (trace != traces.end() && trace->index == i) {
            ex.trace_id = trace->trace_id;
            ex.span_id = trace->span_id;
        }
        store.keep_exemplar(s, r.xfer_us, ex);
    }
}

void agent_metrics::keep_last_exemplars(std::span<const transfer_record> transfers,
                                        const label_table& labels,
                                        std::span<const transfer_trace> traces) {
    auto& store = processor_->store();
    exemplar_marks_.series.clear();
    exemplar_marks_.marked.clear();
    // From the last transfer back: the first met in a bucket is the one whose exemplar an
    // observation of each in turn would have left there.
    auto trace = traces.rbegin();
    // The buckets of the transfer met last (the next one in the round): a request's blocks
    // are mostly one peer's and in the same buckets, which that one has taken already.
    series_ref last_series{UINT32_MAX, UINT32_MAX};
    std::size_t last_buckets[2] = {};
    for (std::size_t i = transfers.size(); i-- > 0;) {
        const transfer_record& r = transfers[i];
        if (r.notified || r.attrs.status != transfer_status::success || !r.timed ||
            r.request_id.empty()) {
            continue;
        }
        const series_ref to[2] = {xfer_time_us_, latency_series(r.attrs, labels).duration};
        // With the bounds shared (tallies_latency), a value's bucket is one in both.
        const std::size_t first = store.bucket_index(to[0], r.xfer_us);
        const std::size_t buckets[2] = {
            first, tally_latency_ ? first : store.bucket_index(to[1], r.xfer_us)};
        if (to[1].family == last_series.family && to[1].index == last_series.index &&
            buckets[0] == last_buckets[0] && buckets[1] == last_buckets[1]) {
            continue;
        }
        last_series = to[1];
        last_buckets[0] = buckets[0];
        last_buckets[1] = buckets[1];
        // A view: the bucket's exemplar copies it into memory it keeps, so a tagged transfer
        // allocates nothing here.
        metrics::exemplar_view ex("request_id", r.request_id, r.timestamp_us);
        while (trace != traces.rend() && trace->index > i) {
            ++trace;
        }
        if (trace != traces.rend() && trace->index == i) {
            ex.trace_id = trace->trace_id;
            ex.span_id = trace->span_id;
        }
        for (std::size_t k = 0; k < 2; ++k) {
            const std::size_t count = store.families()[to[k].family].spec().bounds.size() + 1;
            if (exemplar_marks_.first(to[k], buckets[k], count)) {
                store.keep_exemplar(to[k], r.xfer_us, ex);
            }
        }
    }
}

bool agent_metrics::exemplar_marks::first(series_ref s, std::size_t bucket, std::size_t buckets) {
    auto it = std::find_if(series.begin(), series.end(), [s](const auto& e) {
        return e.first.family == s.family && e.first.index == s.index;
    });
    if (it == series.end()) {
        series.emplace_back(s, marked.size());
        marked.resize(marked.size() + buckets, false);
        it = series.end() - 1;
    }
    const std::size_t at = it->second + std::min(bucket, buckets - 1);
    if (marked[at]) {
        return false;
    }
    marked[at] = true;
    return true;
}

}  // namespace xtel::metrics
