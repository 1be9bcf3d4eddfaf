// Prints the events of an xtel flight recorder file as the NIXL documents show them. Both this
// program and examples/python/telemetry_reader.py print the same bytes for every file; the
// usage text below (help_text) says what each option does and what each exit status means.

#include <fmt/format.h>

#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "xtel/flight_recorder.hpp"

namespace {

namespace fr = xtel::flight_recorder;

constexpr std::string_view help_text =
    R"(usage: telemetry_reader [--follow [--retry]] [--json] [--interval-ms N] <path>
       telemetry_reader --telemetry_path <path> [options]

Prints the events of an xtel flight recorder file, oldest first, then one line on stderr
saying how many it read and how many it missed (overwritten before it could read them).

options:
  -h, --help          print this help and exit
  -f, --follow        keep printing new events as the writer publishes them; stops when the
                      writer closes the file, when the writer dies without closing it (its lock
                      is free), or, without --retry, when the path is replaced or removed
  -F, --retry         with --follow: when the path is replaced or removed, say so on stderr,
                      wait for a new file at the path and follow it from its beginning
  --json              one JSON object per event (and per run of missed events)
  --interval-ms N     how often --follow looks for new events (default 100)

Event names are bytes: the bytes before the first NUL among the first 37. A printable ASCII
byte is printed as itself, except a backslash, printed as \\; any other byte is printed as
\xNN (two lower-case hex digits). JSON strings hold that same text, escaped as JSON needs.

exit status:
  0    done: the file was read, or the followed writer closed it, died, or it was replaced
  2    the file is not a flight recorder this reader can read, or was damaged while being read
       (truncated, write sequence gone backwards); one line on stderr says why
  64   bad command line
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

struct options {
    std::string path;
    bool follow = false;
    bool retry = false;
    bool json = false;
    int interval_ms = 100;
};

[[noreturn]] void usage_error(std::string_view why) {
    fmt::print(stderr, "telemetry_reader: {}\n(telemetry_reader --help says more)\n", why);
    std::exit(64);
}

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--follow" || a == "-f") {
            o.follow = true;
        } else if (a == "--retry" || a == "-F") {
            o.retry = true;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--interval-ms" && i + 1 < argc) {
            o.interval_ms = std::atoi(argv[++i]);
            if (o.interval_ms <= 0) {
                usage_error("--interval-ms takes a positive number of milliseconds");
            }
        } else if (a == "--telemetry_path" && i + 1 < argc) {
            o.path = argv[++i];
        } else if (a == "--help" || a == "-h") {
            fmt::print("{}", help_text);
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
    explicit printer(bool json) : json_(json) {}

    void event(const xtel::event& e) {
        const auto ts = format_timestamp(e.timestamp_us);
        const auto name = escape_name(e.name_view());
        if (json_) {
            fmt::print(
                "{{\"timestamp_us\":{},\"timestamp\":\"{}\",\"category\":\"{}\",\"event\":\"{}\","
                "\"value\":{}}}\n",
                e.timestamp_us, ts, xtel::to_string(e.cat), json_escape(name), e.value);
        } else {
            fmt::print(
                "=== NIXL Telemetry Event ===\nTimestamp: {}\nCategory: {}\nEvent: {}\nValue: "
                "{}\n===========================\n\n",
                ts, xtel::to_string(e.cat), name, e.value);
        }
        ++read_;
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
    std::uint64_t read_ = 0;
    std::uint64_t reported_ = 0;
    std::uint64_t missed_total_ = 0;
};

/// Prints everything published so far, a bounded step at a time so that a signal ends even
/// the read of a huge ring promptly.
void drain(fr::reader& r, printer& out) {
    constexpr std::uint64_t step = 4096;
    do {
        r.poll(
            [&](const xtel::event& e) {
                out.missed(r);
                out.event(e);
            },
            step);
        out.missed(r);
        std::fflush(stdout);
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

}  // namespace

int main(int argc, char** argv) {
    const options opts = parse_args(argc, argv);
    install_signal_handlers();
    printer out(opts.json);
    try {
        auto r = std::make_unique<fr::reader>(opts.path);
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
