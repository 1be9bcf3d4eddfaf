// What xtel top reads from a snapshot, and the rates and percentiles of two readings.

#include "top_view.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>

namespace xtel::top {

namespace {

// ---- Reading a snapshot ----------------------------------------------------------------------

/// A label a series must carry to be counted.
struct label_is {
    std::string_view name;
    std::string_view value;
};

const metrics::family_snapshot* find_family(const metrics::snapshot& s, std::string_view name) {
    const auto it =
        std::lower_bound(s.families.begin(), s.families.end(), name,
                         [](const auto& f, std::string_view n) { return f.spec.name < n; });
    return it != s.families.end() && it->spec.name == name ? &*it : nullptr;
}

/// The column of label `name` in `f`'s series; nullopt when the family has no such label.
std::optional<std::size_t> label_column(const metrics::family_snapshot& f, std::string_view name) {
    const auto& names = f.spec.label_names;
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
        return std::nullopt;
    }
    return static_cast<std::size_t>(it - names.begin());
}

bool series_matches(const metrics::family_snapshot& f,
                    const metrics::series& s,
                    std::initializer_list<label_is> where) {
    for (const auto& l : where) {
        const auto col = label_column(f, l.name);
        if (!col || s.label_values[*col] != l.value) {
            return false;
        }
    }
    return true;
}

std::uint64_t pow10(std::uint8_t decimals) {
    std::uint64_t p = 1;
    for (std::uint8_t i = 0; i < decimals; ++i) {
        p *= 10;
    }
    return p;
}

/// The sum of the values of `family`'s series that carry `where`, in the family's unit (whole
/// units: the counters read here count bytes, requests and records); nullopt when the snapshot
/// has no such family.
std::optional<std::uint64_t> sum_of(const metrics::snapshot& s,
                                    std::string_view family,
                                    std::initializer_list<label_is> where = {}) {
    const auto* f = find_family(s, family);
    if (f == nullptr) {
        return std::nullopt;
    }
    std::uint64_t sum = 0;
    for (const auto& series : f->series) {
        if (series_matches(*f, series, where)) {
            sum += series.value;
        }
    }
    return sum / pow10(f->spec.decimals);
}

/// A family's series added up into one histogram, bounds in seconds (`per_second` of the
/// family's shown units make a second); nullopt when the snapshot has no such histogram.
std::optional<latency_histogram> histogram_of(const metrics::snapshot& s,
                                              std::string_view family,
                                              double per_second) {
    const auto* f = find_family(s, family);
    if (f == nullptr || f->spec.type != metrics::metric_type::histogram) {
        return std::nullopt;
    }
    latency_histogram h;
    // One division by a whole number: 10 us comes out as the double nearest 1e-5, as written.
    const double divisor = per_second * static_cast<double>(pow10(f->spec.decimals));
    for (const double b : f->spec.bounds) {
        h.bounds.push_back(b / divisor);
    }
    h.buckets.assign(h.bounds.size(), 0);
    for (const auto& series : f->series) {
        for (std::size_t i = 0; i < h.buckets.size() && i < series.buckets.size(); ++i) {
            h.buckets[i] += series.buckets[i];
        }
        h.count += series.count;
    }
    return h;
}

/// Every series of `family` by the value of its label `label`, in the family's order.
std::optional<std::vector<std::pair<std::string, std::uint64_t>>> by_label(
    const metrics::snapshot& s, std::string_view family, std::string_view label) {
    const auto* f = find_family(s, family);
    if (f == nullptr) {
        return std::nullopt;
    }
    const auto col = label_column(*f, label);
    if (!col) {
        return std::nullopt;
    }
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const auto& series : f->series) {
        const auto& key = series.label_values[*col];
        const auto it =
            std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == key; });
        if (it == out.end()) {
            out.emplace_back(key, series.value);
        } else {
            it->second += series.value;
        }
    }
    return out;
}

/// `first` when the snapshot has it, else what `fallback` reads.
template <class T, class F>
std::optional<T> or_read(std::optional<T> first, F fallback) {
    return first ? first : fallback();
}

std::optional<std::uint64_t> parse_number(std::string_view v) {
    std::uint64_t n = 0;
    const auto* end = v.data() + v.size();
    const auto [p, ec] = std::from_chars(v.data(), end, n);
    if (v.empty() || ec != std::errc{} || p != end) {
        return std::nullopt;
    }
    return n;
}

}  // namespace

sample sample_of(const metrics::snapshot& s,
                 writer_state state,
                 std::optional<clock::time_point> last_published) {
    sample out;
    out.state = state;
    out.last_published = last_published;
    for (const auto& l : s.labels) {
        if (l.name == "agent_name") {
            out.name = l.value;
        } else if (l.name == "pid") {
            out.pid = parse_number(l.value).value_or(0);
        } else if (l.name == "rank") {
            out.rank = parse_number(l.value);
        }
    }
    const label_is ok{"status", "success"};
    out.tx_bytes = or_read(sum_of(s, "agent_tx_bytes_total"), [&] {
                       return sum_of(s, "xtel_transfer_bytes_total", {{"direction", "tx"}, ok});
                   }).value_or(0);
    out.rx_bytes = or_read(sum_of(s, "agent_rx_bytes_total"), [&] {
                       return sum_of(s, "xtel_transfer_bytes_total", {{"direction", "rx"}, ok});
                   }).value_or(0);
    if (const auto tx = sum_of(s, "agent_tx_requests_num_total")) {
        out.transfers = *tx + sum_of(s, "agent_rx_requests_num_total").value_or(0);
    } else {
        out.transfers = sum_of(s, "xtel_transfer_requests_total", {ok}).value_or(0);
    }
    out.memory =
        or_read(sum_of(s, "xtel_memory_registered_bytes"), [&]() -> std::optional<std::uint64_t> {
            // NIXL's are cumulative: what is registered now is the difference.
            const auto reg = sum_of(s, "agent_memory_registered_total");
            const auto dereg = sum_of(s, "agent_memory_deregistered_total");
            if (!reg || !dereg) {
                return std::nullopt;
            }
            return *reg > *dereg ? *reg - *dereg : 0;
        });
    out.peers = sum_of(s, "xtel_connections");
    out.latency = or_read(histogram_of(s, "xtel_transfer_duration_seconds", 1.0), [&] {
                      return histogram_of(s, "agent_xfer_time_us", 1e6);
                  }).value_or(latency_histogram{});
    out.errors = or_read(by_label(s, "xtel_errors_total", "kind"), [&] {
                     return by_label(s, "agent_errors_total", "status");
                 }).value_or(std::vector<std::pair<std::string, std::uint64_t>>{});
    out.dropped = or_read(sum_of(s, "xtel_telemetry_events_dropped_total"), [&] {
                      return sum_of(s, "agent_telemetry_events_dropped_total");
                  }).value_or(0);
    return out;
}

std::optional<double> quantile(double q,
                               const std::vector<double>& bounds,
                               const std::vector<std::uint64_t>& buckets,
                               std::uint64_t count) {
    if (count == 0 || bounds.empty() || buckets.size() != bounds.size()) {
        return std::nullopt;
    }
    const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count);
    std::uint64_t below = 0;  // observations in the buckets before i
    for (std::size_t i = 0; i < bounds.size(); ++i) {
        const std::uint64_t in = buckets[i];
        if (in > 0 && static_cast<double>(below + in) >= rank) {
            const double lower = i == 0 ? std::min(0.0, bounds[0]) : bounds[i - 1];
            const double into = (rank - static_cast<double>(below)) / static_cast<double>(in);
            return lower + (bounds[i] - lower) * std::max(0.0, into);
        }
        below += in;
    }
    // Above every bound (the +Inf bucket): nothing to interpolate towards.
    return bounds.back();
}

row make_row(const sample& now,
             const sample* before,
             std::chrono::duration<double> elapsed,
             clock::time_point at) {
    row r;
    r.name = now.name;
    r.pid = now.pid;
    r.rank = now.rank;
    r.state = now.state;
    if (now.last_published && at > *now.last_published) {
        r.stale_for = std::chrono::floor<std::chrono::seconds>(at - *now.last_published);
    }
    r.tx_bytes = now.tx_bytes;
    r.rx_bytes = now.rx_bytes;
    r.initiated = now.transfers > 0 || now.tx_bytes > 0 || now.rx_bytes > 0;
    r.memory = now.memory;
    r.peers = now.peers;
    r.dropped = now.dropped;
    for (const auto& e : now.errors) {
        r.errors_total += e.second;
        if (e.second > 0) {
            r.errors.push_back(e);
        }
    }
    std::stable_sort(r.errors.begin(), r.errors.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });

    const bool comparable = before != nullptr && before->pid == now.pid && elapsed.count() > 0;
    const auto rate = [&](std::uint64_t n, std::uint64_t b) -> std::optional<double> {
        if (!comparable || n < b) {
            return std::nullopt;
        }
        return static_cast<double>(n - b) / elapsed.count();
    };
    if (comparable) {
        r.tx_rate = rate(now.tx_bytes, before->tx_bytes);
        r.rx_rate = rate(now.rx_bytes, before->rx_bytes);
        r.transfer_rate = rate(now.transfers, before->transfers);
    }

    // The interval's observations: the buckets' growth since the earlier reading.
    const auto& h = now.latency;
    if (comparable && before->latency.bounds == h.bounds && before->latency.count < h.count) {
        const auto& b = before->latency;
        std::vector<std::uint64_t> grown(h.buckets.size());
        bool ok = true;
        for (std::size_t i = 0; i < grown.size() && ok; ++i) {
            ok = h.buckets[i] >= b.buckets[i];
            grown[i] = ok ? h.buckets[i] - b.buckets[i] : 0;
        }
        if (ok) {
            r.p50 = quantile(0.5, h.bounds, grown, h.count - b.count);
            r.p99 = quantile(0.99, h.bounds, grown, h.count - b.count);
        }
    }
    if (!r.p50) {
        r.p50 = quantile(0.5, h.bounds, h.buckets, h.count);
        r.p99 = quantile(0.99, h.bounds, h.buckets, h.count);
        r.latency_since_start = r.p50.has_value();
    }
    return r;
}

std::vector<row> rate_tracker::update(std::vector<sample> samples, clock::time_point at) {
    const std::chrono::duration<double> elapsed = at - previous_at_;
    std::vector<row> rows;
    rows.reserve(samples.size());
    std::map<std::pair<std::string, std::uint64_t>, sample> next;
    for (auto& s : samples) {
        const auto key = std::make_pair(s.name, s.pid);
        const auto it = previous_.find(key);
        rows.push_back(make_row(s, it == previous_.end() ? nullptr : &it->second, elapsed, at));
        next.insert_or_assign(key, std::move(s));
    }
    previous_ = std::move(next);
    previous_at_ = at;
    return rows;
}

}  // namespace xtel::top
