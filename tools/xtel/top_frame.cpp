// The table xtel top draws: its columns, sorting and the frame's text (the name filter is
// top_filter.cpp's, the units top_units.cpp's).

#include "top_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace xtel::top {

// ---- Columns and sorting --------------------------------------------------------------------

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
    {column::memory, "mem", "MEM", 8, false, true},
    {column::peers, "peers", "PEERS", 5, false, true},
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
    const auto count = [](const std::optional<std::uint64_t>& v) {
        return v ? sort_key{true, static_cast<double>(*v)} : sort_key{false, 0};
    };
    // An agent that initiated nothing shows no bytes or rates: they sort as missing.
    const auto own = [&](sort_key k) { return r.initiated ? k : sort_key{false, 0}; };
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
            return own(opt(r.tx_rate));
        case column::rx_rate:
            return own(opt(r.rx_rate));
        case column::transfer_rate:
            return own(opt(r.transfer_rate));
        case column::p50:
            return opt(r.p50);
        case column::p99:
            return opt(r.p99);
        case column::tx_total:
            return own({true, static_cast<double>(r.tx_bytes)});
        case column::rx_total:
            return own({true, static_cast<double>(r.rx_bytes)});
        case column::memory:
            return count(r.memory);
        case column::peers:
            return count(r.peers);
        case column::dropped:
            return {true, static_cast<double>(r.dropped)};
        case column::errors:
            return {true, static_cast<double>(r.errors_total)};
    }
    return {};
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

/// A latency ends in its own column, '*' or a space; none is "-" where every other column's
/// "-" is, under its header's last letter.
std::string latency_text(const row& r, const std::optional<double>& v) {
    if (!v) {
        return "-";
    }
    return format_seconds(*v) + (r.latency_since_start ? "*" : " ");
}

/// The errors of a row or of the totals as the ERRORS column shows them: kind:count, the most
/// first, or "-" for none.
std::string errors_text(const std::vector<std::pair<std::string, std::uint64_t>>& errors) {
    std::string out;
    for (const auto& [kind, n] : errors) {
        out += fmt::format("{}{}:{}", out.empty() ? "" : " ", printable(kind), n);
    }
    return out.empty() ? "-" : out;
}

std::string cell(const row& r, column c) {
    // What an agent that initiated nothing moved is unknown to it (one-sided transfers): "-".
    const auto rate = [&r](const std::optional<double>& v, auto format) {
        return v && r.initiated ? format(*v) : std::string("-");
    };
    const auto own_bytes = [&r](std::uint64_t b) {
        return r.initiated ? format_bytes(static_cast<double>(b)) : std::string("-");
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
            return own_bytes(r.tx_bytes);
        case column::rx_total:
            return own_bytes(r.rx_bytes);
        case column::memory:
            return r.memory ? format_bytes(static_cast<double>(*r.memory)) : "-";
        case column::peers:
            return r.peers ? std::to_string(*r.peers) : "-";
        case column::dropped:
            return format_count(static_cast<double>(r.dropped));
        case column::errors:
            return errors_text(r.errors);
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

/// Sums over the agents shown, in the rows' units; the byte totals also exactly, so that a
/// reader (or a test) can check them to the byte.
std::string totals_line(const std::vector<row>& rows, std::uint64_t read_errors) {
    std::uint64_t tx = 0, rx = 0, dropped = 0;
    std::optional<std::uint64_t> memory;
    std::map<std::string, std::uint64_t> errors;
    std::optional<double> tx_rate, rx_rate, transfer_rate;
    const auto add = [](std::optional<double>& sum, const std::optional<double>& v) {
        if (v) {
            sum = sum.value_or(0) + *v;
        }
    };
    for (const auto& r : rows) {
        tx += r.tx_bytes;
        rx += r.rx_bytes;
        if (r.memory) {
            memory = memory.value_or(0) + *r.memory;
        }
        for (const auto& [kind, n] : r.errors) {
            errors[kind] += n;
        }
        dropped += r.dropped;
        add(tx_rate, r.tx_rate);
        add(rx_rate, r.rx_rate);
        add(transfer_rate, r.transfer_rate);
    }
    std::vector<std::pair<std::string, std::uint64_t>> by_count(errors.begin(), errors.end());
    std::stable_sort(by_count.begin(), by_count.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    const auto rate = [](const std::optional<double>& v, auto format) {
        return v ? format(*v) : std::string("-");
    };
    const auto bytes = [](std::uint64_t b) {
        return fmt::format("{} ({} B)", format_bytes(static_cast<double>(b)), b);
    };
    std::string t = fmt::format(
        "total  tx {}  rx {}  mem {}  tx/s {}  rx/s {}  xfers/s {}  errors {}  dropped {}",
        bytes(tx), bytes(rx), memory ? bytes(*memory) : std::string("-"),
        rate(tx_rate, format_bytes), rate(rx_rate, format_bytes), rate(transfer_rate, format_count),
        errors_text(by_count), format_count(static_cast<double>(dropped)));
    if (read_errors > 0) {
        t += fmt::format("  unreadable files {}", read_errors);
    }
    return t;
}

constexpr std::string_view keys_line =
    "q quit  s/S sort column  r reverse  f or / filter  c clear filter  space refresh";
constexpr std::string_view since_start_line =
    "* latency since the agent started: nothing was timed in the last interval";
constexpr std::string_view no_transfer_line =
    "- under TX and RX: no transfer of its own; peers read and write its memory (MEM) "
    "one-sided, unseen by it";

/// The lines under the table: what its marks mean (only those it shows), then in a terminal
/// the message or the filter being typed, and the keys.
std::vector<std::string> footer_lines(const std::vector<row>& rows, const frame_options& o) {
    std::vector<std::string> footer;
    const bool since_start =
        std::any_of(rows.begin(), rows.end(), [](const row& r) { return r.latency_since_start; });
    if (since_start) {
        footer.emplace_back(since_start_line);
    }
    if (std::any_of(rows.begin(), rows.end(), [](const row& r) { return !r.initiated; })) {
        footer.emplace_back(no_transfer_line);
    }
    if (o.interactive) {
        footer.push_back(
            o.editing_filter
                ? fmt::format("filter (Enter keeps it, Esc drops it): {}_", printable(o.filter))
                : printable(o.message));
        footer.emplace_back(keys_line);
    }
    return footer;
}

/// The table's rows, `rows` being those of the `agents` found that the filter keeps; or why
/// there are none.
std::vector<std::string> body_lines(std::size_t agents,
                                    const std::vector<row>& rows,
                                    std::size_t name_width,
                                    const frame_options& o) {
    std::vector<std::string> body;
    if (agents == 0) {
        body.push_back(fmt::format(
            "no agents: no node file in {0} (agents publish one there when started with "
            "NIXL_TELEMETRY_EXPORTER=node NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH={0})",
            printable(o.dir)));
    } else if (rows.empty()) {
        body.push_back(fmt::format("no agent matches the filter '{}' ({} hidden)",
                                   printable(o.filter), agents));
    }
    for (const auto& r : rows) {
        body.push_back(table_line(name_width, [&](column c) { return cell(r, c); }));
    }
    return body;
}

/// Cuts `body` to the room that `height` lines leave beside the `fixed` ones, its last line
/// then saying how many rows were cut.
void fit_body(std::vector<std::string>& body, std::size_t fixed, std::size_t height) {
    const std::size_t room = height > fixed ? height - fixed : 0;
    if (body.size() > room) {
        const std::size_t kept = room > 0 ? room - 1 : 0;
        const std::size_t more = body.size() - kept;
        body.resize(kept);
        if (room > 0) {
            body.push_back(fmt::format("... {} more (f filters by name)", more));
        }
    }
}

}  // namespace

std::string unpublished_line(const node::notice& n) {
    return fmt::format("not published: agent {} pid {} could not publish {}: {}: {}", n.agent_name,
                       n.pid, n.node_file, n.reason, n.error);
}

frame format_frame(std::vector<row> rows, const frame_options& o) {
    const auto all = rows;
    std::erase_if(rows, [&](const row& r) { return !name_matches(o.filter, r.name); });
    sort_rows(rows, o.sort, o.reverse);

    frame f;
    f.lines.push_back(title_line(all, rows.size(), o));
    f.lines.push_back(totals_line(rows, o.read_errors));
    for (const auto& n : o.notices) {
        f.lines.push_back(printable(n));
    }
    f.lines.emplace_back();

    std::size_t name_width = min_name_width;
    for (const auto& r : rows) {
        name_width = std::clamp(r.name.size(), name_width, max_name_width);
    }
    std::pair<std::size_t, std::size_t> sort_at;
    f.header_line = f.lines.size();
    f.lines.push_back(table_line(
        name_width, [](column c) { return std::string(spec_of(c).header); }, o.sort, &sort_at));

    const std::vector<std::string> footer = footer_lines(rows, o);
    std::vector<std::string> body = body_lines(all.size(), rows, name_width, o);
    if (o.height > 0) {
        fit_body(body, f.lines.size() + footer.size(), o.height);
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
