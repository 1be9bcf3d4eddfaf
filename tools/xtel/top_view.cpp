// What xtel top reads from a snapshot, and the rates and percentiles of two readings.

#include "top_view.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <limits>

#include "xtel/metrics/native_histogram.hpp"

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
    if (f->spec.native && f->spec.bounds.empty()) {
        // Native only: its classic form is the +Inf bucket alone, which says nothing of latency.
        // Native buckets are over the values as shown, so per_second of them make a second.
        native_latency n;
        n.schema = f->spec.native_schema;
        n.per_second = per_second;
        for (const auto& series : f->series) {
            add_native(n, series);
            h.count += series.count;
        }
        h.native = std::move(n);
        return h;
    }
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

/// `n`'s buckets at `schema` (no higher than n's): each bucket in the one holding it there.
native_latency at_schema(const native_latency& n, int schema) {
    if (schema >= n.schema) {
        return n;
    }
    native_latency out;
    out.schema = schema;
    out.per_second = n.per_second;
    out.zero_count = n.zero_count;
    for (const auto& [index, count] : n.buckets) {
        out.buckets[metrics::native::downscaled(index, n.schema - schema)] += count;
    }
    return out;
}

/// `n` as classic buckets: the zero bucket's bound 0, then each non-empty bucket's bound,
/// after the bound below it (empty) unless that is the bucket before, so that every bucket
/// interpolates within its own bounds.
void classic_form(const native_latency& n,
                  std::vector<double>& bounds,
                  std::vector<std::uint64_t>& buckets) {
    const auto bound = [&](std::int32_t i) {
        return metrics::native::upper_bound(i, n.schema) / n.per_second;
    };
    if (n.zero_count > 0 || !n.buckets.empty()) {
        bounds.push_back(0);
        buckets.push_back(n.zero_count);
    }
    std::optional<std::int32_t> previous;
    for (const auto& [index, count] : n.buckets) {
        if (count == 0) {
            continue;
        }
        if (index > std::numeric_limits<std::int32_t>::min() &&
            (!previous || *previous != index - 1)) {
            bounds.push_back(bound(index - 1));
            buckets.push_back(0);
        }
        bounds.push_back(bound(index));
        buckets.push_back(count);
        previous = index;
    }
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

void add_native(native_latency& into, const metrics::series& s) {
    const int schema = std::min(into.schema, static_cast<int>(s.native_schema));
    into = at_schema(into, schema);
    for (std::size_t k = 0; k < s.native_buckets.size(); ++k) {
        if (s.native_buckets[k] == 0) {
            continue;
        }
        // The codec keeps native_first + size - 1 within int32.
        const auto i = static_cast<std::int32_t>(s.native_first + static_cast<std::int64_t>(k));
        into.buckets[metrics::native::downscaled(i, s.native_schema - schema)] +=
            s.native_buckets[k];
    }
    into.zero_count += s.zero_count;
}

std::optional<latency_histogram> growth(const latency_histogram& now,
                                        const latency_histogram& before) {
    if (now.count < before.count || now.native.has_value() != before.native.has_value()) {
        return std::nullopt;
    }
    latency_histogram out;
    out.count = now.count - before.count;
    if (now.native) {
        const int schema = std::min(now.native->schema, before.native->schema);
        native_latency n = at_schema(*now.native, schema);
        const native_latency b = at_schema(*before.native, schema);
        if (n.zero_count < b.zero_count) {
            return std::nullopt;
        }
        n.zero_count -= b.zero_count;
        for (const auto& [index, count] : b.buckets) {
            const auto it = n.buckets.find(index);
            if (count == 0) {
                continue;
            }
            if (it == n.buckets.end() || it->second < count) {
                return std::nullopt;
            }
            it->second -= count;
            if (it->second == 0) {
                n.buckets.erase(it);
            }
        }
        out.native = std::move(n);
        return out;
    }
    if (now.bounds != before.bounds || now.buckets.size() != before.buckets.size()) {
        return std::nullopt;
    }
    out.bounds = now.bounds;
    out.buckets.resize(now.buckets.size());
    for (std::size_t i = 0; i < out.buckets.size(); ++i) {
        if (now.buckets[i] < before.buckets[i]) {
            return std::nullopt;
        }
        out.buckets[i] = now.buckets[i] - before.buckets[i];
    }
    return out;
}

std::optional<double> quantile(double q, const latency_histogram& h) {
    if (!h.native) {
        return quantile(q, h.bounds, h.buckets, h.count);
    }
    std::vector<double> bounds;
    std::vector<std::uint64_t> buckets;
    classic_form(*h.native, bounds, buckets);
    return quantile(q, bounds, buckets, h.count);
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
    if (comparable && before->latency.count < h.count) {
        if (const auto grown = growth(h, before->latency)) {
            r.p50 = quantile(0.5, *grown);
            r.p99 = quantile(0.99, *grown);
        }
    }
    if (!r.p50) {
        r.p50 = quantile(0.5, h);
        r.p99 = quantile(0.99, h);
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
