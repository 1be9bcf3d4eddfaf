#include "top_options.hpp"

#include <fmt/format.h>

#include "xtel/core/parse.hpp"
#include "xtel/node/allowed_uids.hpp"

namespace xtel::top {

namespace {

constexpr std::string_view usage_text =
    "Usage: xtel top [--dir DIR] [--sort COLUMN] [--reverse] [--filter GLOB]\n"
    "                [--interval SECONDS] [--stale-ttl SECONDS] [--once]\n"
    "                [--allow-uid UID|NAME[,...]]...\n"
    "\n"
    "A live view of every agent of this node: the metrics each agent started with\n"
    "NIXL_TELEMETRY_EXPORTER=node publishes into DIR/<agent name>.metrics, read as\n"
    "xtel-exporter reads them, one row per agent, refreshed every interval: tx and rx bytes\n"
    "per second, transfers per second, latency p50 and p99 over the interval (marked * when\n"
    "nothing was timed in it: then since the agent started), bytes in all, memory\n"
    "registered now (what peers may read or write), peers loaded, dropped records, errors\n"
    "by kind, and whether the writer is live, closed or dead. Bytes and rates are those of\n"
    "the agent's own transfers: a target, whose memory peers read and write one-sided, shows\n"
    "- there. The second line sums the agents shown, bytes exactly.\n"
    "\n"
    "  --dir DIR             the agents' NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH (default\n"
    "                        /dev/shm)\n"
    "  --sort COLUMN         the column to sort by (default tx): {}\n"
    "  --reverse             sort the other way (names and pids down, numbers up)\n"
    "  --filter GLOB         only the agents whose name matches the shell pattern GLOB\n"
    "                        (*, ?, [...]); without * ? or [, those whose name contains it\n"
    "  --interval SECONDS    how often to refresh (default 1; 0.1 to 3600)\n"
    "  --stale-ttl SECONDS   how long an agent that has stopped is still shown (default 60)\n"
    "  --once                print one frame on stdout, the rates over one interval, and exit\n"
    "                        (no terminal needed: for scripts)\n"
    "  --allow-uid UID|NAME[,...]\n"
    "                        also show the node files these users own (repeatable); by\n"
    "                        default only the files of the user it runs as, as xtel-exporter\n"
    "  --help                this text\n"
    "\n"
    "Keys: q quit, s and S the next and previous sort column, r reverse, f or / type a\n"
    "filter (Enter keeps it, Esc drops it), c clear the filter, space refresh now.\n"
    "Exit status: 0 done, 1 an error (standard output not a terminal without --once),\n"
    "64 bad usage.\n";

constexpr std::string_view option_names[] = {"--dir",       "--sort",    "--filter", "--interval",
                                             "--stale-ttl", "--reverse", "--once",   "--allow-uid"};

bool takes_value(std::string_view arg) {
    return arg != "--reverse" && arg != "--once";
}

bool is_option(std::string_view arg) {
    for (const auto name : option_names) {
        if (arg == name) {
            return true;
        }
    }
    return false;
}

/// Seconds with up to three decimals ("1", "0.5", "2.25"), as milliseconds.
std::chrono::milliseconds parse_interval(std::string_view value) {
    constexpr std::string_view accepted =
        "expected seconds from 0.1 to 3600, a whole number or with up to three decimals (0.5)";
    std::uint64_t ms = 0;
    std::size_t i = 0;
    for (; i < value.size() && value[i] >= '0' && value[i] <= '9'; ++i) {
        if (ms > 3600 * 1000) {
            parse::fail("--interval", value, accepted);
        }
        ms = ms * 10 + static_cast<std::uint64_t>(value[i] - '0');
    }
    if (i == 0) {
        parse::fail("--interval", value, accepted);
    }
    ms *= 1000;
    if (i < value.size()) {
        const auto decimals = value.substr(i + 1);
        if (value[i] != '.' || decimals.empty() || decimals.size() > 3 ||
            decimals.find_first_not_of("0123456789") != std::string_view::npos) {
            parse::fail("--interval", value, accepted);
        }
        std::uint64_t scale = 100;
        for (const char c : decimals) {
            ms += static_cast<std::uint64_t>(c - '0') * scale;
            scale /= 10;
        }
    }
    const auto interval = std::chrono::milliseconds(ms);
    if (interval < options::min_interval || interval > options::max_interval) {
        parse::fail("--interval", value, accepted);
    }
    return interval;
}

void set(options& o, std::string_view arg, std::string_view value) {
    if (arg == "--dir") {
        o.dir = parse::existing_directory("--dir", value);
    } else if (arg == "--sort") {
        const auto c = column_from_key(value);
        if (!c) {
            parse::fail("--sort", value, "expected a column: " + column_keys());
        }
        o.sort = *c;
    } else if (arg == "--filter") {
        o.filter = value;
    } else if (arg == "--interval") {
        o.interval = parse_interval(value);
    } else if (arg == "--stale-ttl") {
        o.stale_ttl_s = parse::unsigned_integer("--stale-ttl", value, 0, 365 * 86400);
    } else if (arg == "--reverse") {
        o.reverse = true;
    } else if (arg == "--allow-uid") {
        const auto uids = node::parse_allowed_uids("--allow-uid", value);
        o.allowed_uids.insert(o.allowed_uids.end(), uids.begin(), uids.end());
    } else {
        o.once = true;
    }
}

}  // namespace

std::string usage() {
    return fmt::format(fmt::runtime(usage_text), column_keys());
}

options parse_options(int argc, char** argv) {
    options o;
    // Help wherever it is asked, whatever else is given (a value that is wrong included).
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            o.help = true;
            return o;
        }
    }
    bool dir_given = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        const parse::option_arg split = parse::split_option(arg);
        arg = split.name;
        std::string_view value = split.value;
        const bool has_value = split.has_value;
        if (!is_option(arg)) {
            throw usage_error(fmt::format(
                "'{}' is not an option: expected --dir, --sort, --reverse, --filter, --interval, "
                "--stale-ttl, --once, --allow-uid or --help",
                arg));
        }
        if (!takes_value(arg) && has_value) {
            throw usage_error(fmt::format("{} takes no value", arg));
        }
        if (takes_value(arg) && !has_value) {
            if (i + 1 >= argc) {
                throw usage_error(fmt::format("{} needs a value", arg));
            }
            value = argv[++i];
        }
        dir_given = dir_given || arg == "--dir";
        try {
            set(o, arg, value);
        } catch (const config_error& e) {
            throw usage_error(e.what());
        }
    }
    if (!dir_given) {
        try {
            o.dir = parse::existing_directory("--dir", o.dir.string());
        } catch (const config_error& e) {
            throw usage_error(e.what());
        }
    }
    return o;
}

}  // namespace xtel::top
