#include "top_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <compare>
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

// ---- Columns, sorting, filtering ------------------------------------------------------------

namespace {

struct column_spec {
    column id;
    std::string_view key;  ///< what --sort takes
    std::string_view header;
    std::size_t width;  ///< 0: sized to the content (the agent's name, the errors)
    bool left;          ///< aligned left (text) rather than right (numbers)
    bool descending;    ///< sorted biggest first unless reversed
};

// The one list of columns: the table, --sort, the `s` key and the usage all read it.
constexpr column_spec columns[] = {
    {column::agent, "agent", "AGENT", 0, true, false},
    {column::pid, "pid", "PID", 7, false, false},
    {column::rank, "rank", "RANK", 4, false, false},
    {column::state, "state", "STATE", 10, true, false},
    {column::tx_rate, "tx", "TX/s", 8, false, true},
    {column::rx_rate, "rx", "RX/s", 8, false, true},
    {column::transfer_rate, "xfers", "XFERS/s", 7, false, true},
    {column::p50, "p50", "P50", 8, false, true},
    {column::p99, "p99", "P99", 8, false, true},
    {column::tx_total, "tx-total", "TX TOTAL", 8, false, true},
    {column::rx_total, "rx-total", "RX TOTAL", 8, false, true},
    {column::dropped, "dropped", "DROPPED", 7, false, true},
    {column::errors, "errors", "ERRORS", 0, true, true},
};

const column_spec& spec_of(column c) noexcept {
    return columns[static_cast<std::size_t>(c)];
}

/// What a row is sorted by in one column: a number, or for the agent column the name.
struct sort_key {
    bool present = true;
    double number = 0;
};

sort_key key_of(const row& r, column c) {
    const auto opt = [](const std::optional<double>& v) {
        return v ? sort_key{true, *v} : sort_key{false, 0};
    };
    switch (c) {
        case column::agent:
            return {};
        case column::pid:
            return {true, static_cast<double>(r.pid)};
        case column::rank:
            return r.rank ? sort_key{true, static_cast<double>(*r.rank)} : sort_key{false, 0};
        case column::state:
            // live, then closed, then dead; the longest gone last.
            return {true,
                    static_cast<double>(r.state) * 1e12 + static_cast<double>(r.stale_for.count())};
        case column::tx_rate:
            return opt(r.tx_rate);
        case column::rx_rate:
            return opt(r.rx_rate);
        case column::transfer_rate:
            return opt(r.transfer_rate);
        case column::p50:
            return opt(r.p50);
        case column::p99:
            return opt(r.p99);
        case column::tx_total:
            return {true, static_cast<double>(r.tx_bytes)};
        case column::rx_total:
            return {true, static_cast<double>(r.rx_bytes)};
        case column::dropped:
            return {true, static_cast<double>(r.dropped)};
        case column::errors:
            return {true, static_cast<double>(r.errors_total)};
    }
    return {};
}

/// One character of a bracket expression at `p[i]`, `\` quoting the next; advances `i`.
char bracket_char(std::string_view p, std::size_t& i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
        ++i;
    }
    return p[i++];
}

/// Matches `c` against the bracket expression starting at `p[i]` (just after `[`). Returns
/// the index after its `]`, or nullopt when it has no `]` (then `[` is an ordinary character).
std::optional<std::size_t> match_bracket(std::string_view p, std::size_t i, char c, bool& hit) {
    const bool negate = i < p.size() && (p[i] == '!' || p[i] == '^');
    if (negate) {
        ++i;
    }
    bool found = false;
    bool first = true;
    while (i < p.size() && (first || p[i] != ']')) {
        first = false;
        const char lo = bracket_char(p, i);
        char hi = lo;
        if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
            ++i;
            hi = bracket_char(p, i);
        }
        found = found || (lo <= c && c <= hi);
    }
    if (i >= p.size()) {
        return std::nullopt;
    }
    hit = found != negate;
    return i + 1;
}

/// The whole of `name` against the whole of `p`; `*` by backtracking to the last star.
bool glob(std::string_view p, std::string_view name) {
    std::size_t pi = 0, ni = 0;
    std::optional<std::size_t> star_p, star_n;
    while (ni < name.size()) {
        bool advanced = false;
        if (pi < p.size()) {
            const char pc = p[pi];
            if (pc == '*') {
                star_p = ++pi;
                star_n = ni;
                continue;
            }
            if (pc == '?') {
                advanced = true;
                ++pi;
            } else if (pc == '[') {
                bool hit = false;
                if (const auto after = match_bracket(p, pi + 1, name[ni], hit)) {
                    advanced = hit;
                    if (hit) {
                        pi = *after;
                    }
                } else if (name[ni] == '[') {
                    advanced = true;
                    ++pi;
                }
            } else {
                const bool quoted = pc == '\\' && pi + 1 < p.size();
                if (p[pi + (quoted ? 1 : 0)] == name[ni]) {
                    advanced = true;
                    pi += quoted ? 2 : 1;
                }
            }
        }
        if (advanced) {
            ++ni;
        } else if (star_p) {
            pi = *star_p;
            ni = ++*star_n;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*') {
        ++pi;
    }
    return pi == p.size();
}

}  // namespace

std::string_view column_key(column c) noexcept {
    return spec_of(c).key;
}

std::optional<column> column_from_key(std::string_view key) noexcept {
    for (const auto& c : columns) {
        if (c.key == key) {
            return c.id;
        }
    }
    return std::nullopt;
}

std::string column_keys() {
    std::string out;
    for (const auto& c : columns) {
        out += out.empty() ? "" : ", ";
        out += c.key;
    }
    return out;
}

column next_column(column c, bool forward) noexcept {
    constexpr auto n = std::size(columns);
    const auto i = static_cast<std::size_t>(c);
    return columns[forward ? (i + 1) % n : (i + n - 1) % n].id;
}

bool name_matches(std::string_view pattern, std::string_view name) {
    if (pattern.find_first_of("*?[") == std::string_view::npos) {
        return name.find(pattern) != std::string_view::npos;
    }
    return glob(pattern, name);
}

void sort_rows(std::vector<row>& rows, column by, bool reverse) {
    const bool down = spec_of(by).descending != reverse;
    std::stable_sort(rows.begin(), rows.end(), [&](const row& a, const row& b) {
        if (by == column::agent && a.name != b.name) {
            return (a.name < b.name) != reverse;
        }
        const auto ka = key_of(a, by), kb = key_of(b, by);
        if (ka.present != kb.present) {
            return ka.present;
        }
        if (ka.present && ka.number != kb.number) {
            return down ? ka.number > kb.number : ka.number < kb.number;
        }
        return a.name != b.name ? a.name < b.name : a.pid < b.pid;
    });
}

// ---- Units ----------------------------------------------------------------------------------

namespace {

/// `v` (at least 1) with three significant digits: two decimals under 10, one under 100.
std::string three_digits(double v) {
    if (v < 9.995) {
        return fmt::format("{:.2f}", v);
    }
    if (v < 99.95) {
        return fmt::format("{:.1f}", v);
    }
    return fmt::format("{:.0f}", v);
}

}  // namespace

std::string format_bytes(double bytes) {
    if (!(bytes >= 0)) {
        return "-";
    }
    if (bytes < 1024) {
        return fmt::format("{:.0f}B", std::floor(bytes));
    }
    constexpr std::string_view units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = bytes / 1024;
    std::size_t u = 0;
    // From 1023.5 of a unit (which would round to 1024) on, the next unit: 1.00MiB.
    while (v >= 1023.5 && u + 1 < std::size(units)) {
        v /= 1024;
        ++u;
    }
    return three_digits(v) + std::string(units[u]);
}

std::string format_count(double n) {
    if (!(n >= 0)) {
        return "-";
    }
    if (n < 10 && n != std::floor(n)) {
        return fmt::format("{:.1f}", n);
    }
    if (n < 9999.5) {
        return fmt::format("{:.0f}", n);
    }
    constexpr std::string_view units[] = {"k", "M", "G", "T", "P", "E"};
    double v = n / 1000;
    std::size_t u = 0;
    while (v >= 999.5 && u + 1 < std::size(units)) {
        v /= 1000;
        ++u;
    }
    return three_digits(v) + std::string(units[u]);
}

std::string format_seconds(double s) {
    if (!(s >= 0)) {
        return "-";
    }
    if (s < 999.5e-9) {
        return fmt::format("{:.0f}ns", s * 1e9);
    }
    if (s < 999.5e-6) {
        return three_digits(s * 1e6) + "us";
    }
    if (s < 999.5e-3) {
        return three_digits(s * 1e3) + "ms";
    }
    return three_digits(s) + "s";
}

// ---- The frame ------------------------------------------------------------------------------

namespace {

/// The agent column's width: the longest name shown, within these.
constexpr std::size_t min_name_width = 5;
constexpr std::size_t max_name_width = 32;

/// `s` with every byte outside printable ASCII as '?': names and messages come from files that
/// anyone who can write the directory may have made, and must not move the cursor.
std::string printable(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c < 0x20 || c > 0x7e) {
            c = '?';
        }
    }
    return out;
}

/// `text` in `width` columns, cut with a '~' when longer.
std::string pad(std::string_view text, std::size_t width, bool left) {
    if (text.size() > width) {
        return width == 0 ? std::string() : std::string(text.substr(0, width - 1)) + "~";
    }
    const std::string fill(width - text.size(), ' ');
    return left ? std::string(text) + fill : fill + std::string(text);
}

std::string age(std::chrono::seconds s) {
    const auto n = s.count();
    if (n < 100) {
        return fmt::format("{}s", n);
    }
    if (n < 100 * 60) {
        return fmt::format("{}m", n / 60);
    }
    return fmt::format("{}h", n / 3600);
}

std::string state_text(const row& r) {
    switch (r.state) {
        case writer_state::live:
            return "live";
        case writer_state::closed:
            return "closed " + age(r.stale_for);
        case writer_state::dead:
            return "dead " + age(r.stale_for);
    }
    return "?";
}

std::string latency_text(const row& r, const std::optional<double>& v) {
    if (!v) {
        return "- ";
    }
    return format_seconds(*v) + (r.latency_since_start ? "*" : " ");
}

std::string cell(const row& r, column c) {
    const auto rate = [](const std::optional<double>& v, auto format) {
        return v ? format(*v) : std::string("-");
    };
    switch (c) {
        case column::agent:
            return printable(r.name);
        case column::pid:
            return r.pid != 0 ? std::to_string(r.pid) : "-";
        case column::rank:
            return r.rank ? std::to_string(*r.rank) : "-";
        case column::state:
            return state_text(r);
        case column::tx_rate:
            return rate(r.tx_rate, format_bytes);
        case column::rx_rate:
            return rate(r.rx_rate, format_bytes);
        case column::transfer_rate:
            return rate(r.transfer_rate, format_count);
        case column::p50:
            return latency_text(r, r.p50);
        case column::p99:
            return latency_text(r, r.p99);
        case column::tx_total:
            return format_bytes(static_cast<double>(r.tx_bytes));
        case column::rx_total:
            return format_bytes(static_cast<double>(r.rx_bytes));
        case column::dropped:
            return format_count(static_cast<double>(r.dropped));
        case column::errors: {
            std::string out;
            for (const auto& [kind, n] : r.errors) {
                out += fmt::format("{}{}:{}", out.empty() ? "" : " ", printable(kind), n);
            }
            return out.empty() ? "-" : out;
        }
    }
    return "?";
}

/// One line of the table: `text(c)` for each column, in its width, one space apart; where
/// the sorted column starts and ends goes to `sort_at`.
template <class Text>
std::string table_line(std::size_t name_width,
                       Text text,
                       column sorted = column::agent,
                       std::pair<std::size_t, std::size_t>* sort_at = nullptr) {
    std::string line;
    for (const auto& c : columns) {
        if (!line.empty()) {
            line += ' ';
        }
        const std::size_t begin = line.size();
        const std::string t = text(c.id);
        const std::size_t width = c.id == column::agent ? name_width
                                  : c.width == 0        ? t.size()
                                                        : c.width;
        line += pad(t, width, c.left);
        if (sort_at != nullptr && c.id == sorted) {
            *sort_at = {begin, line.size()};
        }
    }
    while (!line.empty() && line.back() == ' ') {
        line.pop_back();
    }
    return line;
}

std::string title_line(const std::vector<row>& all, std::size_t shown, const frame_options& o) {
    std::size_t count[3] = {};
    for (const auto& r : all) {
        ++count[static_cast<std::size_t>(r.state)];
    }
    std::string t = "xtel top";
    if (!o.time.empty()) {
        t += "  " + o.time;
    }
    t += fmt::format("  {}  every {:g}s  agents {}: {} live, {} closed, {} dead  sort {}{}",
                     printable(o.dir), o.interval.count(), all.size(), count[0], count[1], count[2],
                     column_key(o.sort), o.reverse ? " (reversed)" : "");
    if (!o.filter.empty()) {
        t += fmt::format("  filter '{}' ({} hidden)", printable(o.filter), all.size() - shown);
    }
    return t;
}

/// Exact sums over the agents shown, so that a reader (or a test) can check them to the byte.
std::string totals_line(const std::vector<row>& rows, std::uint64_t read_errors) {
    std::uint64_t tx = 0, rx = 0, errors = 0, dropped = 0;
    std::optional<double> tx_rate, rx_rate, transfer_rate;
    const auto add = [](std::optional<double>& sum, const std::optional<double>& v) {
        if (v) {
            sum = sum.value_or(0) + *v;
        }
    };
    for (const auto& r : rows) {
        tx += r.tx_bytes;
        rx += r.rx_bytes;
        errors += r.errors_total;
        dropped += r.dropped;
        add(tx_rate, r.tx_rate);
        add(rx_rate, r.rx_rate);
        add(transfer_rate, r.transfer_rate);
    }
    const auto rate = [](const std::optional<double>& v, auto format) {
        return v ? format(*v) : std::string("-");
    };
    std::string t =
        fmt::format("total  tx {} B  rx {} B  tx/s {}  rx/s {}  xfers/s {}  errors {}  dropped {}",
                    tx, rx, rate(tx_rate, format_bytes), rate(rx_rate, format_bytes),
                    rate(transfer_rate, format_count), errors, dropped);
    if (read_errors > 0) {
        t += fmt::format("  unreadable files {}", read_errors);
    }
    return t;
}

constexpr std::string_view keys_line =
    "q quit  s/S sort column  r reverse  f or / filter  c clear filter  space refresh";
constexpr std::string_view since_start_line =
    "* latency since the agent started: nothing was timed in the last interval";

}  // namespace

frame format_frame(std::vector<row> rows, const frame_options& o) {
    const auto all = rows;
    std::erase_if(rows, [&](const row& r) { return !name_matches(o.filter, r.name); });
    sort_rows(rows, o.sort, o.reverse);

    frame f;
    f.lines.push_back(title_line(all, rows.size(), o));
    f.lines.push_back(totals_line(rows, o.read_errors));
    f.lines.emplace_back();

    std::size_t name_width = min_name_width;
    for (const auto& r : rows) {
        name_width = std::clamp(r.name.size(), name_width, max_name_width);
    }
    std::pair<std::size_t, std::size_t> sort_at;
    f.header_line = f.lines.size();
    f.lines.push_back(table_line(
        name_width, [](column c) { return std::string(spec_of(c).header); }, o.sort, &sort_at));

    std::vector<std::string> footer;
    const bool since_start =
        std::any_of(rows.begin(), rows.end(), [](const row& r) { return r.latency_since_start; });
    if (since_start) {
        footer.emplace_back(since_start_line);
    }
    if (o.interactive) {
        footer.push_back(
            o.editing_filter
                ? fmt::format("filter (Enter keeps it, Esc drops it): {}_", printable(o.filter))
                : printable(o.message));
        footer.emplace_back(keys_line);
    }

    std::vector<std::string> body;
    if (all.empty()) {
        body.push_back(fmt::format(
            "no agents: no node file in {0} (agents publish one there when started with "
            "NIXL_TELEMETRY_EXPORTER=node NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH={0})",
            printable(o.dir)));
    } else if (rows.empty()) {
        body.push_back(fmt::format("no agent matches the filter '{}' ({} hidden)",
                                   printable(o.filter), all.size()));
    }
    for (const auto& r : rows) {
        body.push_back(table_line(name_width, [&](column c) { return cell(r, c); }));
    }
    if (o.height > 0) {
        const std::size_t fixed = f.lines.size() + footer.size();
        const std::size_t room = o.height > fixed ? o.height - fixed : 0;
        if (body.size() > room) {
            const std::size_t kept = room > 0 ? room - 1 : 0;
            const std::size_t more = body.size() - kept;
            body.resize(kept);
            if (room > 0) {
                body.push_back(fmt::format("... {} more (f filters by name)", more));
            }
        }
    }
    f.lines.insert(f.lines.end(), body.begin(), body.end());
    f.lines.insert(f.lines.end(), footer.begin(), footer.end());

    if (o.height > 0 && f.lines.size() > o.height) {
        f.lines.resize(o.height);
    }
    if (o.width > 0) {
        for (auto& line : f.lines) {
            if (line.size() > o.width) {
                line.resize(o.width);
            }
        }
    }
    f.sort_begin = o.width > 0 ? std::min(sort_at.first, o.width) : sort_at.first;
    f.sort_end = o.width > 0 ? std::min(sort_at.second, o.width) : sort_at.second;
    return f;
}

}  // namespace xtel::top
