#include "straggler.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace xtel::top {

void add_peer_histograms(const metrics::snapshot& s, peer_histograms& into) {
    const auto f = std::find_if(s.families.begin(), s.families.end(), [](const auto& f) {
        return f.spec.name == "xtel_transfer_duration_seconds";
    });
    if (f == s.families.end() || f->spec.type != metrics::metric_type::histogram) {
        return;
    }
    const auto& names = f->spec.label_names;
    const auto op = std::find(names.begin(), names.end(), "operation");
    const auto peer = std::find(names.begin(), names.end(), "remote_agent");
    if (op == names.end() || peer == names.end()) {
        return;
    }
    double divisor = 1;
    for (std::uint8_t i = 0; i < f->spec.decimals; ++i) {
        divisor *= 10;
    }
    // A native-only histogram (no bounds): its native buckets, in seconds as shown.
    const bool native = f->spec.native && f->spec.bounds.empty();
    for (const auto& series : f->series) {
        auto& h = into[{series.label_values[static_cast<std::size_t>(op - names.begin())],
                        series.label_values[static_cast<std::size_t>(peer - names.begin())]}];
        if (h.count == 0 && h.bounds.empty() && !h.native && native) {
            h.native.emplace().schema = f->spec.native_schema;
        }
        if (h.native.has_value() != native) {
            continue;  // one agent's native, another's classic: not added into one histogram
        }
        if (native) {
            add_native(*h.native, series);
            h.count += series.count;
            continue;
        }
        if (h.bounds.empty()) {
            for (const double b : f->spec.bounds) {
                h.bounds.push_back(b / divisor);
            }
            h.buckets.assign(h.bounds.size(), 0);
        }
        if (h.bounds.size() != f->spec.bounds.size()) {
            continue;  // agents with other bounds: not added into one histogram
        }
        for (std::size_t i = 0; i < h.buckets.size() && i < series.buckets.size(); ++i) {
            h.buckets[i] += series.buckets[i];
        }
        h.count += series.count;
    }
}

std::vector<straggler> find_stragglers(const peer_histograms& delta,
                                       std::chrono::duration<double> window,
                                       const straggler_rule& rule) {
    std::vector<straggler> out;
    if (window.count() <= 0) {
        return out;
    }
    // The qualifying peers of each operation, with their p99.
    std::map<std::string, std::vector<straggler>> by_operation;
    for (const auto& [key, h] : delta) {
        if (h.count < rule.min_timed) {
            continue;
        }
        const auto p99 = quantile(0.99, h);
        if (!p99) {
            continue;
        }
        by_operation[key.first].push_back({key.first, key.second, *p99, 0, 0, h.count});
    }
    for (auto& [operation, peers] : by_operation) {
        if (peers.size() < rule.min_peers) {
            continue;
        }
        // The median as Prometheus's quantile(0.5, ...) takes it: the middle value, or the mean
        // of the two middle ones.
        std::vector<double> p99s;
        for (const auto& p : peers) {
            p99s.push_back(p.p99);
        }
        std::sort(p99s.begin(), p99s.end());
        const std::size_t n = p99s.size();
        const double median = n % 2 == 1 ? p99s[n / 2] : (p99s[n / 2 - 1] + p99s[n / 2]) / 2;
        for (auto& p : peers) {
            if (median > 0 && p.p99 > rule.k * median && p.p99 - median > rule.margin) {
                p.median = median;
                p.ratio = p.p99 / median;
                out.push_back(p);
            }
        }
    }
    return out;
}

std::vector<straggler> straggler_tracker::update(peer_histograms now, clock::time_point at) {
    while (!readings_.empty() && at - readings_.front().first > window_) {
        readings_.pop_front();
    }
    readings_.emplace_back(at, std::move(now));
    if (readings_.size() < 2) {
        return {};
    }
    const auto& [then, before] = readings_.front();
    const auto& latest = readings_.back().second;
    peer_histograms delta;
    for (const auto& [key, h] : latest) {
        latency_histogram d = h;
        const auto it = before.find(key);
        if (it != before.end()) {
            const auto& b = it->second;
            if (auto grown = growth(h, b)) {
                d = std::move(*grown);
            } else if (!h.native && !b.native && b.bounds == h.bounds) {
                // A bucket went back: it counts from 0 (a native histogram does as a whole).
                for (std::size_t i = 0; i < d.buckets.size(); ++i) {
                    d.buckets[i] =
                        h.buckets[i] >= b.buckets[i] ? h.buckets[i] - b.buckets[i] : h.buckets[i];
                }
                d.count = h.count >= b.count ? h.count - b.count : h.count;
            }
        }
        delta.emplace(key, std::move(d));
    }
    return find_stragglers(delta, at - then);
}

std::string straggler_line(const straggler& s) {
    return fmt::format("straggler  {} to {}  p99 {} = {:.1f}x the median {}", s.operation,
                       s.remote_agent, format_seconds(s.p99), s.ratio, format_seconds(s.median));
}

}  // namespace xtel::top
