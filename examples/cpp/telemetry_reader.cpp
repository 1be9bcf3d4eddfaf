// Prints the events of an xtel flight recorder file as the NIXL documents show them.
//
//   telemetry_reader [--follow] [--json] [--interval-ms N] <path>
//
// Without --follow it prints what the file holds now and exits. With --follow it keeps
// printing new events until interrupted. Either way it says how many events it missed
// (overwritten before it read them). A file that is not a telemetry buffer ends it with exit
// status 2 and one line on stderr.

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <thread>

#include "xtel/flight_recorder.hpp"

namespace {

volatile std::sig_atomic_t interrupted = 0;

void on_signal(int) {
    interrupted = 1;
}

struct options {
    std::string path;
    bool follow = false;
    bool json = false;
    int interval_ms = 100;
};

[[noreturn]] void usage(std::string_view why) {
    fmt::print(stderr,
               "telemetry_reader: {}\nusage: telemetry_reader [--follow] [--json] "
               "[--interval-ms N] <path>\n",
               why);
    std::exit(64);
}

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--follow" || a == "-f") {
            o.follow = true;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--interval-ms" && i + 1 < argc) {
            o.interval_ms = std::atoi(argv[++i]);
            if (o.interval_ms <= 0) {
                usage("--interval-ms takes a positive number of milliseconds");
            }
        } else if (a == "--telemetry_path" && i + 1 < argc) {
            o.path = argv[++i];
        } else if (a == "--help" || a == "-h") {
            usage("prints the events of a flight recorder file");
        } else if (!a.empty() && a[0] == '-') {
            usage(fmt::format("unknown option {}", a));
        } else if (o.path.empty()) {
            o.path = a;
        } else {
            usage("one path only");
        }
    }
    if (o.path.empty()) {
        usage("missing the path of a telemetry file");
    }
    return o;
}

std::string format_timestamp(std::uint64_t us) {
    const std::time_t sec = static_cast<std::time_t>(us / 1'000'000);
    std::tm tm{};
    ::localtime_r(&sec, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return fmt::format("{}.{:06d}", buf, us % 1'000'000);
}

/// Names come from a file that may be corrupt: text output shows printable ASCII only.
std::string printable(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c < 0x20 || c > 0x7e) {
            c = '?';
        }
    }
    return out;
}

/// JSON string body; bytes above 0x7f are read as Latin-1 code points (as the Python reader).
std::string json_escape(std::string_view s) {
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20 || c > 0x7e) {
                    out += fmt::format("\\u{:04x}", c);
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out;
}

void print_event(const xtel::event& e, bool json) {
    const auto ts = format_timestamp(e.timestamp_us);
    if (json) {
        fmt::print(
            "{{\"timestamp_us\":{},\"timestamp\":\"{}\",\"category\":\"{}\",\"event\":\"{}\","
            "\"value\":{}}}\n",
            e.timestamp_us, ts, xtel::to_string(e.cat), json_escape(e.name_view()), e.value);
        return;
    }
    fmt::print(
        "=== NIXL Telemetry Event ===\nTimestamp: {}\nCategory: {}\nEvent: {}\nValue: {}\n"
        "===========================\n\n",
        ts, xtel::to_string(e.cat), printable(e.name_view()), e.value);
}

void print_missed(std::uint64_t n, bool json) {
    if (json) {
        fmt::print("{{\"missed\":{}}}\n", n);
    } else {
        fmt::print("=== Missed {} events (overwritten before they were read) ===\n\n", n);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const options opts = parse_args(argc, argv);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    try {
        xtel::flight_recorder::reader r(opts.path);
        std::uint64_t read = 0;
        std::uint64_t missed_reported = 0;
        do {
            read += r.poll([&](const xtel::event& e) {
                // Missed events are reported where they happened in the stream.
                if (r.missed() > missed_reported) {
                    print_missed(r.missed() - missed_reported, opts.json);
                    missed_reported = r.missed();
                }
                print_event(e, opts.json);
            });
            if (r.missed() > missed_reported) {
                print_missed(r.missed() - missed_reported, opts.json);
                missed_reported = r.missed();
            }
            std::fflush(stdout);
            if (!opts.follow) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(opts.interval_ms));
        } while (!interrupted);
        fmt::print(stderr, "{}: {} events read, {} missed\n", opts.path, read, r.missed());
        return 0;
    } catch (const std::exception& ex) {
        fmt::print(stderr, "telemetry_reader: {}\n", ex.what());
        return 2;
    }
}
