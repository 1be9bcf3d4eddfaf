// Prints the events of an xtel flight recorder file as the NIXL documents show them. Both this
// program and examples/python/telemetry_reader.py print the same bytes for every file; the
// usage text below (help_text) says what each option does and what each exit status means.

#include <fmt/format.h>

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/core/names.hpp"
#include "xtel/core/version.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace {

namespace fr = xtel::flight_recorder;

constexpr std::string_view help_text =
    R"(usage: telemetry_reader [options] <path>
       telemetry_reader [options] --telemetry_path <path>

Prints the events of an xtel flight recorder file, oldest first, then one line on stderr
saying how many it read and how many it missed (overwritten before it could read them).

options:
  -h, --help              print this help and exit
      --version           print xtel's version and exit
  --telemetry_path PATH   the file to read; PATH alone, without the option, does the same
  -f, --follow            keep printing new events as the writer publishes them; stops when the
                          writer closes the file, when the writer dies without closing it (its
                          lock is free), or, without --retry, when the path is replaced or removed
  -F, --retry             with --follow: when the path is replaced or removed, say so on stderr,
                          wait for a new file at the path and follow it from its beginning
  --json                  JSON objects, one a line: per event (and per run of missed events),
                          per --summary row, or one for --header
  --interval-ms N         how often --follow looks for new events (default 100)
  --category NAME         only events of category NAME: MEMORY, TRANSFER, CONNECTION, BACKEND,
                          ERROR, PERFORMANCE, SYSTEM or CUSTOM, in any case; repeat the option
                          to keep several categories
  --name GLOB             only events whose whole name matches GLOB, byte by byte and case
                          sensitive: * any bytes, ? one byte, [abc] [a-z] one byte of a set,
                          [!abc] one byte not in it (a [ without its ] is itself)
  --summary               instead of the events, one row per category and event name, sorted by
                          both: count, sum, min, max and last value, and rate_per_s, which is
                          (count - 1) / seconds from the row's earliest to its latest timestamp,
                          truncated to 3 decimals ("-", or null in JSON, for a single event or a
                          zero span). Sums are exact integers, never rounded
  --header                instead of the events, the file's header and what a read found:
                          format version, agent, capacity, writer pid, state (alive; closed;
                          crashed: marked open but no writer holds its lock; or unknown N),
                          creation time, written (events published), read, missed (overwritten
                          before they could be read); with --summary, the summary follows it
--summary and --header read the file once: they do not go with --follow.

Event names are bytes: the bytes before the first NUL among the first 37. A printable ASCII
byte is printed as itself, except a backslash, printed as \\; any other byte is printed as
\xNN (two lower-case hex digits). JSON strings hold that same text, escaped as JSON needs.

Each event and --summary row says its value's unit, known from its category and name for the
events xtel records (docs/events.md): us (microseconds), bytes, count, pid or version. Any
other event's unit is unknown: - in text, null in JSON.

exit status:
  0    done: the file was read, or the followed writer closed it, died, or it was replaced
  2    the file is not a flight recorder this reader can read, or was damaged while being read
       (truncated, write sequence gone backwards); one line on stderr says why
  64   bad command line (one line on stderr says why)
  130  interrupted by SIGINT
  143  terminated by SIGTERM
)";

volatile sig_atomic_t stop_signal = 0;

void on_signal(int signo) {
    stop_signal = signo;
}

/// No SA_RESTART: a signal cuts a sleep short, so every mode ends promptly.
void install_signal_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

/// Whether byte `c` matches the glob element at `p` (a byte, ?, or a [set]); `width` says how
/// many pattern bytes the element spans. A [ without its ] is a plain [.
bool glob_one(std::string_view pattern, std::size_t p, unsigned char c, std::size_t& width) {
    const auto at = [&](std::size_t i) { return static_cast<unsigned char>(pattern[i]); };
    width = 1;
    if (pattern[p] == '?') {
        return true;
    }
    if (pattern[p] != '[') {
        return at(p) == c;
    }
    std::size_t i = p + 1;
    const bool negate = i < pattern.size() && pattern[i] == '!';
    if (negate) {
        ++i;
    }
    const std::size_t start = i;
    if (i < pattern.size() && pattern[i] == ']') {
        ++i;  // a ] first is a member
    }
    while (i < pattern.size() && pattern[i] != ']') {
        ++i;
    }
    if (i >= pattern.size()) {
        return c == '[';
    }
    bool found = false;
    for (std::size_t j = start; j < i;) {
        if (j + 2 < i && pattern[j + 1] == '-') {
            found = found || (at(j) <= c && c <= at(j + 2));
            j += 3;
        } else {
            found = found || at(j) == c;
            ++j;
        }
    }
    width = i + 1 - p;
    return found != negate;
}

/// Whether the bytes of `name` match `pattern` as a whole (help_text, --name); the Python
/// reader's glob_match is the same algorithm, so that both keep the same events.
bool glob_match(std::string_view pattern, std::string_view name) {
    constexpr auto none = std::string_view::npos;
    std::size_t p = 0;
    std::size_t n = 0;
    std::size_t star_p = none;
    std::size_t star_n = 0;
    while (n < name.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star_p = p++;
            star_n = n;
            continue;
        }
        std::size_t width = 1;
        if (p < pattern.size() &&
            glob_one(pattern, p, static_cast<unsigned char>(name[n]), width)) {
            p += width;
            ++n;
            continue;
        }
        if (star_p == none) {
            return false;
        }
        p = star_p + 1;  // the last * takes one more byte
        n = ++star_n;
    }
    while (p < pattern.size() && pattern[p] == '*') {
        ++p;
    }
    return p == pattern.size();
}

/// --category and --name: which events to keep.
struct event_filter {
    std::uint32_t categories = 0;  ///< bit c keeps category c; none set keeps every category
    std::optional<std::string> glob;

    bool keeps(const xtel::event& e) const {
        const auto c = static_cast<unsigned>(e.cat);
        if (categories != 0 && (c >= xtel::category_count || ((categories >> c) & 1U) == 0)) {
            return false;
        }
        return !glob || glob_match(*glob, e.name_view());
    }
};

/// The unit of a built-in event's value, as docs/events.md gives it (the Python reader's
/// unit_of is the same table); empty for any other category and name, a user's own events
/// among them, whose unit only their recorder knows. ASCII "us", not "µs": both readers print
/// ASCII only, whatever the locale's encoding.
std::string_view unit_of(unsigned cat, std::string_view name) {
    namespace n = xtel::names;
    const auto any_of = [name](std::initializer_list<xtel::event_name> names) {
        return std::any_of(names.begin(), names.end(),
                           [name](const xtel::event_name& e) { return e.view() == name; });
    };
    switch (static_cast<xtel::category>(cat)) {
        case xtel::category::memory:
            return any_of({n::agent_memory_registered, n::agent_memory_deregistered}) ? "bytes"
                                                                                      : "";
        case xtel::category::transfer:
            if (any_of({n::agent_tx_bytes, n::agent_rx_bytes})) {
                return "bytes";
            }
            return any_of({n::agent_tx_requests_num, n::agent_rx_requests_num}) ? "count" : "";
        case xtel::category::performance:
            return any_of({n::agent_xfer_time, n::agent_xfer_post_time}) ? "us" : "";
        case xtel::category::connection:
            return any_of({n::agent_connect, n::agent_disconnect, n::agent_connections}) ? "count"
                                                                                         : "";
        case xtel::category::backend:
            if (name == n::ucx_version.view()) {
                return "version";
            }
            if (any_of({n::ucx_backend_init, n::ucx_endpoint_error}) ||
                (name.starts_with(n::ucx_transport_prefix) &&
                 name.size() > n::ucx_transport_prefix.size())) {
                return "count";
            }
            return "";
        case xtel::category::error:
            // Every error kind's event, the two never recorded (ok, in_progress) with them.
            return std::any_of(n::agent_errors.begin(), n::agent_errors.end(),
                               [name](const xtel::event_name& e) { return e.view() == name; })
                       ? "count"
                       : "";
        case xtel::category::system:
            if (any_of({n::agent_start, n::agent_stop})) {
                return "pid";
            }
            return name == n::telemetry_events_dropped.view() ? "count" : "";
        default:
            return "";
    }
}

/// A unit as text prints it: "-" for an unknown one.
std::string_view unit_text(std::string_view unit) {
    return unit.empty() ? "-" : unit;
}

/// A unit as a JSON value: a string, or null for an unknown one.
std::string unit_json(std::string_view unit) {
    return unit.empty() ? std::string("null") : fmt::format("\"{}\"", unit);
}

struct options {
    std::string path;
    bool follow = false;
    bool retry = false;
    bool json = false;
    bool summary = false;
    bool header = false;
    int interval_ms = 100;
    event_filter filter;
};

[[noreturn]] void usage_error(std::string_view why) {
    fmt::print(stderr, "telemetry_reader: {} (telemetry_reader --help says more)\n", why);
    std::exit(64);
}

int parse_interval(std::string_view value) {
    int ms = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
    if (value.empty() || value[0] == '-' || ec != std::errc{} ||
        end != value.data() + value.size() || ms <= 0) {
        usage_error(fmt::format("--interval-ms takes a positive number of milliseconds, not \"{}\"",
                                value));
    }
    return ms;
}

unsigned parse_category(std::string_view value) {
    std::string upper(value);
    for (char& c : upper) {
        if (c >= 'a' && c <= 'z') {
            c = static_cast<char>(c - 'a' + 'A');
        }
    }
    for (unsigned c = 0; c < xtel::category_count; ++c) {
        if (upper == xtel::to_string(static_cast<xtel::category>(c))) {
            return c;
        }
    }
    std::string accepted;
    for (unsigned c = 0; c < xtel::category_count; ++c) {
        accepted +=
            fmt::format("{}{}", c == 0 ? "" : ", ", to_string(static_cast<xtel::category>(c)));
    }
    usage_error(fmt::format("--category: unknown category \"{}\" (accepted, in any case: {})",
                            value, accepted));
}

/// Takes the value of an option at argv[i]; true when `a` is an option that has one.
bool parse_valued(options& o, std::string_view a, int& i, int argc, char** argv) {
    if (a != "--interval-ms" && a != "--telemetry_path" && a != "--category" && a != "--name") {
        return false;
    }
    if (i + 1 >= argc) {
        usage_error(fmt::format("{} needs a value", a));
    }
    const std::string_view value = argv[++i];
    if (a == "--interval-ms") {
        o.interval_ms = parse_interval(value);
    } else if (a == "--telemetry_path") {
        if (!o.path.empty()) {
            usage_error("one path only");
        }
        o.path = value;
    } else if (a == "--category") {
        o.filter.categories |= 1U << parse_category(value);
    } else {
        o.filter.glob = std::string(value);
    }
    return true;
}

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (parse_valued(o, a, i, argc, argv)) {
            continue;
        }
        if (a == "--follow" || a == "-f") {
            o.follow = true;
        } else if (a == "--retry" || a == "-F") {
            o.retry = true;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--summary") {
            o.summary = true;
        } else if (a == "--header") {
            o.header = true;
        } else if (a == "--help" || a == "-h") {
            fmt::print("{}", help_text);
            std::exit(0);
        } else if (a == "--version") {
            fmt::print("telemetry_reader {}\n", xtel::version());
            std::exit(0);
        } else if (!a.empty() && a[0] == '-') {
            usage_error(fmt::format("unknown option {}", a));
        } else if (o.path.empty()) {
            o.path = a;
        } else {
            usage_error("one path only");
        }
    }
    if (o.path.empty()) {
        usage_error("missing the path of a telemetry file");
    }
    if (o.retry && !o.follow) {
        usage_error("--retry goes with --follow");
    }
    if (o.follow && (o.summary || o.header)) {
        usage_error("--summary and --header read the file once: they do not go with --follow");
    }
    return o;
}

std::string format_timestamp(std::uint64_t us) {
    const std::time_t sec = static_cast<std::time_t>(us / 1'000'000);
    std::tm tm{};
    ::localtime_r(&sec, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return fmt::format("{}.{:06d}", buf, us % 1'000'000);
}

/// Names are bytes from a file that may be corrupt; the result is printable ASCII only, and
/// tells every byte sequence apart (help_text).
std::string escape_name(std::string_view s) {
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '\\') {
            out += "\\\\";
        } else if (c >= 0x20 && c <= 0x7e) {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("\\x{:02x}", c);
        }
    }
    return out;
}

/// JSON string body of printable ASCII text: only '"' and '\' need escaping.
std::string json_escape(std::string_view s) {
    std::string out;
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
    return out;
}

/// Prints events and runs of missed events, across every file a --retry run follows.
class printer {
  public:
    printer(bool json, const event_filter& filter) : json_(json), filter_(filter) {}

    /// One event the reader delivered. One the filters keep is printed after the run of
    /// missed events before it, if any.
    void delivered(const xtel::event& e, const fr::reader& r) {
        ++read_;
        if (filter_.keeps(e)) {
            missed(r);
            event(e);
        }
    }

    /// The end of a step: missed events after the last one delivered, and a flush.
    void step_done(const fr::reader& r) {
        missed(r);
        std::fflush(stdout);
    }

    void event(const xtel::event& e) {
        const auto ts = format_timestamp(e.timestamp_us);
        const auto name = escape_name(e.name_view());
        const auto unit = unit_of(static_cast<unsigned>(e.cat), e.name_view());
        if (json_) {
            fmt::print(
                "{{\"timestamp_us\":{},\"timestamp\":\"{}\",\"category\":\"{}\",\"event\":\"{}\","
                "\"value\":{},\"unit\":{}}}\n",
                e.timestamp_us, ts, xtel::to_string(e.cat), json_escape(name), e.value,
                unit_json(unit));
        } else {
            // The unit on a line of its own: NIXL's "Value: N" line stays as tools parse it.
            fmt::print(
                "=== NIXL Telemetry Event ===\nTimestamp: {}\nCategory: {}\nEvent: {}\nValue: "
                "{}\nUnit: {}\n===========================\n\n",
                ts, xtel::to_string(e.cat), name, e.value, unit_text(unit));
        }
    }

    /// Reports the events `r` missed since the last report, where they happened in the stream.
    void missed(const fr::reader& r) {
        if (r.missed() == reported_) {
            return;
        }
        const auto n = r.missed() - reported_;
        if (json_) {
            fmt::print("{{\"missed\":{}}}\n", n);
        } else {
            fmt::print("=== Missed {} events (overwritten before they were read) ===\n\n", n);
        }
        reported_ = r.missed();
        missed_total_ += n;
    }

    /// A new file starts its own missed count.
    void next_file() { reported_ = 0; }

    std::uint64_t read() const { return read_; }
    std::uint64_t missed_total() const { return missed_total_; }

  private:
    bool json_;
    const event_filter& filter_;
    std::uint64_t read_ = 0;
    std::uint64_t reported_ = 0;
    std::uint64_t missed_total_ = 0;
};

/// Decimal digits of a 128-bit number: sums of 64-bit values are kept exact.
std::string to_decimal(unsigned __int128 v) {
    std::string digits;
    do {
        digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
        v /= 10;
    } while (v != 0);
    return digits;
}

/// (count - 1) events per second of `span_us`, truncated to 3 decimals, in integers only so
/// that both readers print the same digits; nothing for one event or a zero span.
std::optional<std::string> rate_text(std::uint64_t count, std::uint64_t span_us) {
    if (count < 2 || span_us == 0) {
        return std::nullopt;
    }
    const unsigned __int128 milli =
        static_cast<unsigned __int128>(count - 1) * 1'000'000'000U / span_us;
    return fmt::format("{}.{:03d}", to_decimal(milli / 1000), static_cast<unsigned>(milli % 1000));
}

/// --summary (and the counting behind --header): per category and event name, count, exact
/// sum, min, max, last value and the span of timestamps.
class summary {
  public:
    explicit summary(const event_filter& filter) : filter_(filter) {}

    void delivered(const xtel::event& e, const fr::reader&) {
        ++read_;
        if (!filter_.keeps(e)) {
            return;
        }
        const auto cat =
            std::min(static_cast<unsigned>(e.cat), static_cast<unsigned>(xtel::category_count));
        auto [it, added] = rows_.try_emplace(key{cat, std::string(e.name_view())});
        row& r = it->second;
        if (added) {
            r = {1, e.value, e.value, e.value, e.value, e.timestamp_us, e.timestamp_us};
            return;
        }
        ++r.count;
        r.sum += e.value;
        r.min = std::min(r.min, e.value);
        r.max = std::max(r.max, e.value);
        r.last = e.value;
        r.first_us = std::min(r.first_us, e.timestamp_us);
        r.last_us = std::max(r.last_us, e.timestamp_us);
    }

    void step_done(const fr::reader& r) { missed_total_ = r.missed(); }

    /// Rows by category number, then by the name's bytes: a table, or one JSON object each.
    void print(bool json) const {
        std::vector<std::array<std::string, columns>> table{
            {"category", "event", "unit", "count", "sum", "min", "max", "last", "rate_per_s"}};
        for (const auto& [k, r] : rows_) {
            const auto category = xtel::to_string(static_cast<xtel::category>(k.first));
            const auto name = escape_name(k.second);
            const auto unit = unit_of(k.first, k.second);
            const auto rate = rate_text(r.count, r.last_us - r.first_us);
            if (json) {
                fmt::print(
                    "{{\"category\":\"{}\",\"event\":\"{}\",\"unit\":{},\"count\":{},\"sum\":{},"
                    "\"min\":{},\"max\":{},\"last\":{},\"rate_per_s\":{},\"min_timestamp_us\":{},"
                    "\"max_timestamp_us\":{}}}\n",
                    category, json_escape(name), unit_json(unit), r.count, to_decimal(r.sum), r.min,
                    r.max, r.last, rate.value_or("null"), r.first_us, r.last_us);
            } else {
                table.push_back({std::string(category), name, std::string(unit_text(unit)),
                                 std::to_string(r.count), to_decimal(r.sum), std::to_string(r.min),
                                 std::to_string(r.max), std::to_string(r.last),
                                 rate.value_or("-")});
            }
        }
        if (!json) {
            print_table(table);
        }
    }

    std::uint64_t read() const { return read_; }
    std::uint64_t missed_total() const { return missed_total_; }

  private:
    static constexpr std::size_t columns = 9;
    using key = std::pair<unsigned, std::string>;  // category (8: UNKNOWN), name bytes
    struct row {
        std::uint64_t count;
        unsigned __int128 sum;
        std::uint64_t min, max, last;
        std::uint64_t first_us, last_us;  // earliest and latest timestamp
    };

    /// Three text columns left-aligned, the numbers right-aligned, two spaces apart.
    static void print_table(const std::vector<std::array<std::string, columns>>& table) {
        std::array<std::size_t, columns> width{};
        for (const auto& cells : table) {
            for (std::size_t i = 0; i < cells.size(); ++i) {
                width[i] = std::max(width[i], cells[i].size());
            }
        }
        for (const auto& cells : table) {
            std::string line = fmt::format("{:<{}}  {:<{}}  {:<{}}", cells[0], width[0], cells[1],
                                           width[1], cells[2], width[2]);
            for (std::size_t i = 3; i < cells.size(); ++i) {
                line += fmt::format("  {:>{}}", cells[i], width[i]);
            }
            fmt::print("{}\n", line);
        }
    }

    const event_filter& filter_;
    std::map<key, row> rows_;  // std::string orders bytes as unsigned, as Python's bytes do
    std::uint64_t read_ = 0;
    std::uint64_t missed_total_ = 0;
};

/// What the header's state says, with the lock telling a live writer from a dead one.
std::string writer_state_text(const fr::reader& r, std::uint32_t state) {
    if (state == static_cast<std::uint32_t>(fr::writer_state::closed)) {
        return "closed";
    }
    if (state == static_cast<std::uint32_t>(fr::writer_state::open)) {
        return r.writer_gone() ? "crashed" : "alive";
    }
    return fmt::format("unknown {}", state);
}

/// --header, after a full read: position() is what the writer had published by then.
void print_header(const fr::reader& r, std::uint64_t read, bool json) {
    const fr::file_header h = r.header();
    const auto agent =
        escape_name(std::string_view(h.agent_name, ::strnlen(h.agent_name, fr::agent_name_size)));
    const auto state = writer_state_text(r, h.state);
    if (json) {
        fmt::print(
            "{{\"format_version\":{},\"agent\":\"{}\",\"capacity\":{},\"writer_pid\":{},"
            "\"state\":\"{}\",\"created_us\":{},\"written\":{},\"read\":{},\"missed\":{}}}\n",
            h.version, json_escape(agent), h.capacity, h.writer_pid, state, h.created_us,
            r.position(), read, r.missed());
        return;
    }
    fmt::print(
        "format version: {}\nagent: {}\ncapacity: {} events\nwriter pid: {}\nstate: {}\n"
        "created: {}\nwritten: {}\nread: {}\nmissed: {}\n",
        h.version, agent, h.capacity, h.writer_pid, state, format_timestamp(h.created_us),
        r.position(), read, r.missed());
}

/// Hands everything published so far to `out` (a printer or a summary), a bounded step at a
/// time so that a signal ends even the read of a huge ring promptly.
template <class Sink>
void drain(fr::reader& r, Sink& out) {
    constexpr std::uint64_t step = 4096;
    do {
        r.poll([&](const xtel::event& e) { out.delivered(e, r); }, step);
        out.step_done(r);
    } while (r.backlog() > 0 && stop_signal == 0);
}

void sleep_ms(int ms) {
    const timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1'000'000};
    ::nanosleep(&ts, nullptr);  // EINTR: a signal ends the sleep early, as wanted
}

void say(const options& o, std::string_view what) {
    fmt::print(stderr, "telemetry_reader: {}: {}\n", o.path, what);
}

/// Waits for a flight recorder to appear at the path again; nullptr when a signal came first.
std::unique_ptr<fr::reader> reopen(const options& o) {
    while (stop_signal == 0) {
        try {
            return std::make_unique<fr::reader>(o.path);
        } catch (const fr::format_error&) {
            sleep_ms(o.interval_ms);  // absent, or not yet a complete recorder
        }
    }
    return nullptr;
}

/// Follows the file until the writer closes it or dies, the path is replaced (without
/// --retry), or a signal comes.
void follow(std::unique_ptr<fr::reader> r, const options& o, printer& out) {
    using clock = std::chrono::steady_clock;
    auto last_lock_check = clock::now();
    while (stop_signal == 0) {
        // Each condition is seen before the final drain, so nothing published before it is lost.
        const bool closed = r->writer_closed();
        const bool replaced = !closed && r->replaced();
        const auto before = r->position();
        drain(*r, out);
        if (closed || stop_signal != 0) {
            return;
        }
        if (replaced) {
            if (!o.retry) {
                say(o, "the file was replaced or removed; stopping (--retry follows the new one)");
                return;
            }
            say(o, "the file was replaced or removed; waiting for the new one");
            r = reopen(o);
            if (!r) {
                return;
            }
            say(o, "following the new file");
            out.next_file();
            continue;
        }
        if (r->position() == before && clock::now() - last_lock_check >= std::chrono::seconds(1)) {
            last_lock_check = clock::now();
            if (r->writer_gone()) {
                drain(*r, out);
                say(o,
                    fmt::format("writer pid {} ended without closing the file", r->writer_pid()));
                return;
            }
        }
        sleep_ms(o.interval_ms);
    }
}

/// --summary and --header: one read of the file, then what it found.
int read_once(fr::reader& r, const options& o) {
    summary found(o.filter);
    drain(r, found);
    if (stop_signal == 0) {
        if (o.header) {
            print_header(r, found.read(), o.json);
        }
        if (o.summary) {
            found.print(o.json);
        }
    }
    std::fflush(stdout);
    fmt::print(stderr, "{}: {} events read, {} missed\n", o.path, found.read(),
               found.missed_total());
    return stop_signal != 0 ? 128 + stop_signal : 0;
}

}  // namespace

int main(int argc, char** argv) {
    const options opts = parse_args(argc, argv);
    install_signal_handlers();
    printer out(opts.json, opts.filter);
    try {
        auto r = std::make_unique<fr::reader>(opts.path);
        if (opts.summary || opts.header) {
            return read_once(*r, opts);
        }
        if (opts.follow) {
            follow(std::move(r), opts, out);
        } else {
            drain(*r, out);
        }
    } catch (const fr::format_error& ex) {
        std::fflush(stdout);
        fmt::print(stderr, "telemetry_reader: {}\n", ex.what());
        return 2;
    }
    fmt::print(stderr, "{}: {} events read, {} missed\n", opts.path, out.read(),
               out.missed_total());
    return stop_signal != 0 ? 128 + stop_signal : 0;
}
