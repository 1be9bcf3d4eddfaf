#pragma once
// Agents' metric state of a chosen size for the node exporter's cases (node_bench.cpp) and the
// node files generator (node_scale/node_files.cpp), made through the real metric model: the
// agent's metrics::agent_metrics, fed transfer records to `peers` remote agents as the
// flusher feeds it. Each peer adds the same series (the comprehensive builder's bytes and
// requests counters and the {op, peer} duration and post-duration histograms, for reads and
// writes), so a series count is reached by choosing the number of peers.

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// The node exporter's metric model is private to the library: reached from src/
// (bench/CMakeLists.txt).
#include "xtel/core/label_table.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel_bench {

/// Transfers of one agent: for each of `peers` remote agents, reads and writes, several of
/// each with latencies spread over the histogram's buckets, every one timed and carrying a
/// request id (so the histograms hold exemplars, as with a caller that tags its transfers).
class agent_traffic {
  public:
    static constexpr std::uint64_t per_peer_op = 4;

    explicit agent_traffic(std::size_t peers) {
        ids_.reserve(peers * 2 * per_peer_op);
        for (std::size_t p = 0; p < peers; ++p) {
            const xtel::label_id peer = labels_.intern(fmt::format("decode-{:05}", p));
            for (const auto op : {xtel::transfer_op::read, xtel::transfer_op::write}) {
                for (std::uint64_t k = 0; k < per_peer_op; ++k) {
                    ids_.push_back(fmt::format("req-{}-{}", p, records_.size()));
                    records_.push_back(record(peer, op, records_.size()));
                }
            }
        }
        for (std::size_t i = 0; i < records_.size(); ++i) {
            records_[i].request_id = ids_[i];
        }
    }
    agent_traffic(const agent_traffic&) = delete;
    agent_traffic& operator=(const agent_traffic&) = delete;

    const std::vector<xtel::transfer_record>& records() const { return records_; }
    const xtel::label_table& labels() const { return labels_; }

    /// One more transfer to the first peer: changes values, adds no series.
    xtel::transfer_record one_more(std::uint64_t i) const {
        auto r = record(
            records_.empty() ? xtel::label_table::unknown : records_.front().attrs.remote_agent,
            xtel::transfer_op::write, i);
        r.request_id = {};
        return r;
    }

  private:
    static xtel::transfer_record record(xtel::label_id peer,
                                        xtel::transfer_op op,
                                        std::uint64_t i) {
        xtel::transfer_record r;
        r.timestamp_us = 1'732'460'000'000'000 + i * 1000;
        r.bytes = 65536 << (i % 6);
        r.requests = 1 + i % 4;
        r.post_us = 5 + i % 40;
        r.xfer_us = (i * 7919) % 80000;
        r.dir = op == xtel::transfer_op::read ? xtel::direction::rx : xtel::direction::tx;
        r.attrs.op = op;
        r.attrs.remote_agent = peer;
        return r;
    }

    xtel::label_table labels_;
    std::vector<xtel::transfer_record> records_;
    std::vector<std::string> ids_;  // the records' request ids point here
};

/// How a series count counts: as the metric model does (a histogram's label set is one series)
/// or as Prometheus does (one time series per sample line of a scrape: a histogram's label set
/// is a series per bucket, +Inf included, and its _sum and _count). `native`: as the model
/// does, with the latency histograms in native form only (NIXL_TELEMETRY_HISTOGRAM_KIND=native),
/// one series each as a Prometheus that scrapes protobuf stores them.
enum class series_unit { model, time_series, native };

/// The node exporter's settings for these cases: the default buckets (native ones for `unit`
/// native) and builders, and a series limit per family high enough that no peer folds into
/// "other" at 10,000 series (an operator with that many peers raises
/// NIXL_TELEMETRY_PROMETHEUS_MAX_SERIES likewise).
inline xtel::metrics::agent_metrics_settings model_settings(series_unit unit = series_unit::model) {
    xtel::metrics::agent_metrics_settings s;
    if (unit == series_unit::native) {
        s.histograms = xtel::metrics::histogram_kind::native;
    }
    s.hostname = "bench-host";
    s.max_series = xtel::metrics::agent_metrics_settings::max_max_series;
    return s;
}

inline std::size_t series_of(const xtel::metrics::snapshot& s,
                             series_unit unit = series_unit::time_series) {
    using xtel::metrics::metric_type;
    std::size_t n = 0;
    for (const auto& f : s.families) {
        std::size_t each = 1;
        if (unit == series_unit::time_series && f.spec.type == metric_type::histogram) {
            each = f.spec.bounds.size() + 3;
        } else if (unit == series_unit::time_series && f.spec.type == metric_type::summary) {
            each = 2;
        }
        n += each * f.series.size();
    }
    return n;
}

/// The snapshot of an agent named `agent` that has talked to `peers` remote agents (its latency
/// histograms native for `unit` native).
inline std::shared_ptr<const xtel::metrics::snapshot> agent_snapshot(
    const std::string& agent, std::size_t peers, series_unit unit = series_unit::model) {
    xtel::metrics::agent_metrics a(agent, model_settings(unit));
    a.reserve_reader_labels();
    const agent_traffic traffic(peers);
    a.apply_transfers(traffic.records(), traffic.labels());
    a.publish();
    // As the node exporter writes it and a reader reads it: without the labels readers add.
    std::vector<std::byte> bytes;
    xtel::metrics::encode_snapshot(*a.latest(), bytes, xtel::metrics::reserved_label_names);
    return std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::decode_snapshot(bytes));
}

/// The number of peers whose traffic gives an agent at least `series` series counted in `unit`
/// (the agent's own families count too), found from the series one and two peers make.
inline std::size_t peers_for_series(std::size_t series,
                                    series_unit unit = series_unit::time_series) {
    const std::size_t one = series_of(*agent_snapshot("sizing", 1, unit), unit);
    const std::size_t two = series_of(*agent_snapshot("sizing", 2, unit), unit);
    const std::size_t per_peer = two - one;
    const std::size_t base = one - per_peer;
    if (per_peer == 0) {
        throw std::logic_error("a peer adds no series");
    }
    return series <= base + per_peer ? 1 : (series - base + per_peer - 1) / per_peer;
}

}  // namespace xtel_bench
