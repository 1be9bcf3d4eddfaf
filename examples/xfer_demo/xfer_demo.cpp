// Moves data between two xtel agents over UCX, verifies it, and prints throughput as it goes.
// The agents' telemetry pipeline comes from NIXL_TELEMETRY_* (see xtel/agent/agent.hpp).
// `xfer_demo --help` prints the options (the text is `usage_text` below), the variables it reads
// and the exit statuses.
//
// --role both (the default) runs both agents in this process. In two processes, start
// `--role target --metadata FILE` first: it registers its buffer, writes its metadata to FILE,
// and serves until FILE.done appears; then `--role initiator --metadata FILE` reads FILE,
// connects, transfers, and creates FILE.done. Both check the data: the initiator what it read,
// the target what was written into it. SIZE takes a K, M or G suffix (powers of 1024).
// --duration repeats the transfers (each pass reads, checks, writes, and with --role both checks
// the target) until that many seconds have passed, so that something can be done to the running
// agents (to their flight recorders, say) while data keeps moving and is checked on every pass.
// It is a limit on the run, not on the passes' count: no transfer is posted after it, so a slow
// pass (--rate, a large --total) stops part-way; what it moved is checked, and the initiator's
// done file tells a target in another process how much of its buffer was written.
// --linger keeps the agents (and so their telemetry, a Prometheus endpoint say) up for that long
// after the data is verified, or until SIGINT/SIGTERM; telemetry is flushed first.
// --name NAME names the agents NAME-initiator and NAME-target, so that several demos can share
// one telemetry directory (NIXL_TELEMETRY_EXPORTER=node: one file per agent name there);
// --initiator-name and --target-name, wherever they are, override it.
// --notify: each completed transfer notifies the target (transfer_tags::notify), and at the end
// the initiator tells the target, in a notification of its own, how many transfers and bytes it
// made; the target counts what the notifications said and fails unless the two agree.
// Exit status: 0 verified, 1 a transfer or verification failed, 2 bad usage or set-up.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "xtel/agent/agent.hpp"
#include "xtel/core/version.hpp"
#include "xtel/exporters/buffer_settings.hpp"
#include "xtel/node/file.hpp"
#include "xtel/trace/context.hpp"
#include "xtel/trace/sampler.hpp"

namespace {

struct options {
    std::string role = "both";
    std::string metadata;
    std::uint64_t total = 64ull << 20;
    std::uint64_t block = 64ull << 10;
    std::string op = "both";
    std::size_t depth = 16;
    std::uint64_t seed = 1;
    int timeout_s = 60;
    std::string target_name = "xfer_target";
    std::string initiator_name = "xfer_initiator";
    std::string name;  ///< --name: the agents' names unless given on their own
    std::string request_id_prefix = "req-";
    std::string traceparent;  ///< when set, every transfer's tag in place of the request id
    bool allocate_target = true;
    int linger_s = 0;
    int duration_s = 0;
    std::uint64_t rate = 0;  ///< --rate: transfers a second the initiator posts; 0: no pacing
    bool notify = false;     ///< --notify
};

/// What the initiator made with --notify, announced to the target at the end.
struct made_counts {
    std::uint64_t transfers = 0;
    std::uint64_t bytes = 0;
};
made_counts made;

/// The initiator's closing notification: "xfer_demo done: N transfers, B bytes".
constexpr std::string_view done_prefix = "xfer_demo done: ";

constexpr std::string_view usage_text = R"(Usage: xfer_demo [OPTION VALUE]...
Moves data between two agents over UCX and verifies it. Telemetry comes from NIXL_TELEMETRY_*.

  --role both|target|initiator  both agents here (default), or one of two processes
  --metadata FILE               where the target writes its metadata (needed unless --role both)
  --total SIZE                  bytes to move per pass (default 64M; K, M, G suffixes)
  --block SIZE                  bytes per transfer (default 64K)
  --op read|write|both          what the initiator does (default both: read, then write)
  --depth N                     transfers in flight (default 16, 1 to 4096)
  --rate N                      post at most N transfers a second, sleeping between them
                                (default 0: as fast as the transport goes; 1 to 1000000)
  --seed N                      picks the data streams (default 1)
  --timeout SECONDS             how long to wait for the other process (default 60)
  --duration SECONDS            repeat passes, each verified, for this long: no transfer
                                is posted after it, within a pass too (the pass it stops
                                checks the bytes it moved), so the run ends a few
                                transfers' time after it (default 0: one pass, however
                                long)
  --name NAME                   name the agents NAME-initiator and NAME-target, so that
                                several demos can share one telemetry directory
  --target-name NAME            the target agent's name (default xfer_target, or
                                NAME-target with --name)
  --initiator-name NAME         the initiator agent's name (default xfer_initiator, or
                                NAME-initiator with --name)
  --notify                      every transfer notifies the target, which counts them and
                                checks it got one per transfer (the only option without a
                                value)
  --request-id-prefix PREFIX    tags the n-th transfer the initiator creates (from 0) with the
                                request id PREFIX<n>, shown as exemplars (default req-)
  --traceparent TRACEPARENT     tags every transfer the initiator creates with this W3C
                                traceparent instead: their spans join that trace, under
                                that span (00-<32 hex>-<16 hex>-<2 hex>)
  --target-memory allocated|registered
                                how the target's buffer is made (default allocated)
  --linger SECONDS              stay up this long after verifying, or until SIGINT/SIGTERM
                                (default 0)
  --help, -h                    print this and exit, whatever else is given
  --version                     print xtel's version and exit

With --role target, start it first: it serves until FILE.done appears, which the initiator
(--role initiator --metadata FILE) creates once it has transferred and verified.

Environment (read when the agents are built; all of them: docs/configuration.md):
  NIXL_TELEMETRY_ENABLE=y       turns telemetry on (off when unset)
  NIXL_TELEMETRY_EXPORTER       buffer (default), prometheus, node, a plugin, or a list
  NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH
                                the flight recorder's and node files' directory (default
                                /dev/shm; one file per agent name), or prometheus's host:port
  NIXL_TELEMETRY_BUFFER_SIZE    events each flight recorder holds (default 4096)
  NIXL_TELEMETRY_RUN_INTERVAL   milliseconds between flushes to the exporters (default 100)
  NIXL_TELEMETRY_PROMETHEUS_ADDRESS
                                where prometheus serves /metrics beside buffer or node
                                (default 127.0.0.1:9464)
  XTEL_LOG_LEVEL                error, warning, info (default) or debug: what xtel logs

Exit status: 0 data verified, 1 a transfer or a verification failed, 2 bad usage or set-up.
)";

/// Bad usage: one line that names the option and the value, on stderr, and exit status 2.
[[noreturn]] void usage(std::string_view why) {
    fmt::print(stderr, "xfer_demo: {} (--help lists the options)\n", why);
    std::exit(2);
}

std::uint64_t parse_size(std::string_view flag, std::string_view v) {
    std::uint64_t n = 0;
    std::size_t i = 0;
    for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) {
        n = n * 10 + static_cast<std::uint64_t>(v[i] - '0');
        if (n > (1ull << 40)) {
            break;
        }
    }
    const std::string_view suffix = v.substr(i);
    std::uint64_t unit = 1;
    if (suffix == "K" || suffix == "KiB")
        unit = 1ull << 10;
    else if (suffix == "M" || suffix == "MiB")
        unit = 1ull << 20;
    else if (suffix == "G" || suffix == "GiB")
        unit = 1ull << 30;
    else if (!suffix.empty())
        i = 0;
    if (i == 0 || n == 0 || n > (1ull << 40) / unit) {
        usage(
            fmt::format("{} '{}' is invalid: expected a size from 1 byte to 1 TiB, like 4096, "
                        "64K, 256M or 1G",
                        flag, v));
    }
    return n * unit;
}

std::uint64_t parse_count(std::string_view flag,
                          std::string_view v,
                          std::uint64_t min,
                          std::uint64_t max) {
    std::uint64_t n = 0;
    bool ok = !v.empty() && v.size() <= 19;
    for (const char c : v) {
        ok = ok && c >= '0' && c <= '9';
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (!ok || n < min || n > max) {
        usage(fmt::format("{} '{}' is invalid: expected a whole number from {} to {}", flag, v, min,
                          max));
    }
    return n;
}

options parse(int argc, char** argv) {
    options o;
    bool target_named = false;
    bool initiator_named = false;
    // --help wins wherever it is, even where an option expects its value: whoever typed it
    // wants the usage, not an error about the rest of the line.
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            fmt::print("{}", usage_text);
            std::exit(0);
        }
        if (a == "--version") {
            fmt::print("xfer_demo {}\n", xtel::version());
            std::exit(0);
        }
    }
    constexpr std::string_view known[] = {"--role",
                                          "--metadata",
                                          "--total",
                                          "--block",
                                          "--op",
                                          "--depth",
                                          "--rate",
                                          "--seed",
                                          "--timeout",
                                          "--linger",
                                          "--duration",
                                          "--name",
                                          "--target-name",
                                          "--initiator-name",
                                          "--request-id-prefix",
                                          "--target-memory",
                                          "--traceparent"};
    for (int i = 1; i < argc; i += 2) {
        const std::string_view a = argv[i];
        if (a == "--notify") {
            o.notify = true;
            --i;  // takes no value
            continue;
        }
        if (std::find(std::begin(known), std::end(known), a) == std::end(known)) {
            usage(a.starts_with("-") ? fmt::format("'{}' is not an option", a)
                                     : fmt::format("'{}' is not an option: every option is "
                                                   "--NAME VALUE",
                                                   a));
        }
        if (i + 1 >= argc) {
            usage(fmt::format("{} needs a value", a));
        }
        const std::string_view v = argv[i + 1];
        if (a == "--role") {
            if (v != "both" && v != "target" && v != "initiator") {
                usage(fmt::format("--role '{}' is invalid: expected both, target or initiator", v));
            }
            o.role = v;
        } else if (a == "--metadata") {
            o.metadata = v;
        } else if (a == "--total") {
            o.total = parse_size(a, v);
        } else if (a == "--block") {
            o.block = parse_size(a, v);
        } else if (a == "--op") {
            if (v != "read" && v != "write" && v != "both") {
                usage(fmt::format("--op '{}' is invalid: expected read, write or both", v));
            }
            o.op = v;
        } else if (a == "--depth") {
            o.depth = parse_count(a, v, 1, 4096);
        } else if (a == "--rate") {
            o.rate = parse_count(a, v, 1, 1'000'000);
        } else if (a == "--seed") {
            o.seed = parse_count(a, v, 0, 1'000'000'000);
        } else if (a == "--timeout") {
            o.timeout_s = static_cast<int>(parse_count(a, v, 1, 86400));
        } else if (a == "--linger") {
            o.linger_s = static_cast<int>(parse_count(a, v, 0, 86400));
        } else if (a == "--duration") {
            o.duration_s = static_cast<int>(parse_count(a, v, 0, 86400));
        } else if (a == "--name") {
            if (v.empty()) {
                usage("--name '' is invalid: expected a name for the pair of agents");
            }
            o.name = v;
        } else if (a == "--target-name") {
            o.target_name = v;
            target_named = true;
        } else if (a == "--initiator-name") {
            o.initiator_name = v;
            initiator_named = true;
        } else if (a == "--request-id-prefix") {
            o.request_id_prefix = v;
        } else if (a == "--traceparent") {
            if (!xtel::trace::parse_traceparent(v)) {
                usage(
                    fmt::format("--traceparent '{}' is invalid: expected a W3C traceparent, "
                                "00-<32 hex digits>-<16 hex digits>-<2 hex digits>, ids not "
                                "all zero",
                                v));
            }
            o.traceparent = v;
        } else if (a == "--target-memory") {
            if (v != "allocated" && v != "registered") {
                usage(
                    fmt::format("--target-memory '{}' is invalid: expected allocated or "
                                "registered",
                                v));
            }
            o.allocate_target = v == "allocated";
        }
    }
    if (!o.name.empty()) {
        if (!target_named) {
            o.target_name = o.name + "-target";
        }
        if (!initiator_named) {
            o.initiator_name = o.name + "-initiator";
        }
    }
    if (o.role != "both" && o.metadata.empty()) {
        usage(fmt::format("--role {} needs --metadata FILE", o.role));
    }
    if (o.block > o.total) {
        usage(fmt::format("--block {} is larger than --total {}", o.block, o.total));
    }
    return o;
}

// ---- data ---------------------------------------------------------------------------------

/// The expected contents: a different stream for the target's initial data and for what the
/// initiator writes, so a transfer that did not happen cannot pass for one that did.
std::uint64_t word_at(std::uint64_t seed, std::uint64_t index) {
    std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + index;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fill(std::byte* p, std::uint64_t n, std::uint64_t seed) {
    for (std::uint64_t i = 0; i < n / 8; ++i) {
        const std::uint64_t w = word_at(seed, i);
        std::memcpy(p + i * 8, &w, 8);
    }
    for (std::uint64_t i = n / 8 * 8; i < n; ++i) {
        p[i] = static_cast<std::byte>(word_at(seed, i / 8) >> (8 * (i % 8)));
    }
}

/// The first offset of [begin, end) where `p` differs from the stream, or nullopt.
std::optional<std::uint64_t> check(const std::byte* p,
                                   std::uint64_t begin,
                                   std::uint64_t end,
                                   std::uint64_t seed) {
    const auto byte_at = [seed](std::uint64_t i) {
        return static_cast<std::byte>(word_at(seed, i / 8) >> (8 * (i % 8)));
    };
    std::uint64_t i = begin;
    for (; i < end && i % 8 != 0; ++i) {
        if (p[i] != byte_at(i)) {
            return i;
        }
    }
    for (; i + 8 <= end; i += 8) {
        const std::uint64_t w = word_at(seed, i / 8);
        if (std::memcmp(p + i, &w, 8) != 0) {
            return i;
        }
    }
    for (; i < end; ++i) {
        if (p[i] != byte_at(i)) {
            return i;
        }
    }
    return std::nullopt;
}

std::uint64_t target_seed(const options& o) {
    return o.seed * 2 + 1;
}
std::uint64_t initiator_seed(const options& o) {
    return o.seed * 2 + 2;
}
bool does_read(const options& o) {
    return o.op != "write";
}
bool does_write(const options& o) {
    return o.op != "read";
}

struct host_buffer {
    explicit host_buffer(std::uint64_t n)
        : data(static_cast<std::byte*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {
        if (data == nullptr) {
            throw std::bad_alloc();
        }
    }
    ~host_buffer() { std::free(data); }
    host_buffer(const host_buffer&) = delete;
    host_buffer& operator=(const host_buffer&) = delete;

    std::byte* data;
};

void require(const xtel::status& st, std::string_view what) {
    if (!st.ok()) {
        throw xtel::error(fmt::format("{}: {}", what, st.to_string()));
    }
}

/// What the agent's telemetry writes, by exporter: the flight recorder's file and the node
/// file (with its suffix) are named, so that a reader can be pointed at them. An exporter that
/// turned itself off (a live agent holds the file already) wrote nothing: no file is named
/// then, as if one had been.
std::string flight_recorder_of(const xtel::agent& a) {
    const auto cfg = xtel::config::from_env();
    if (!cfg.enabled) {
        return "telemetry off";
    }
    const std::string agent = a.name();
    if (const auto off = a.stats().exporters_disabled; off > 0) {
        return fmt::format(
            "telemetry {}: {} of its exporters off, nothing written there (the "
            "error above says why)",
            cfg.exporters_string(), off);
    }
    const std::string dir =
        cfg.output_path.empty() ? xtel::buffer_settings::default_directory : cfg.output_path;
    std::vector<std::string> files;
    const std::vector<std::string> defaults{xtel::config::default_exporter};
    for (const auto& name : cfg.exporters.empty() ? defaults : cfg.exporters) {
        // Built-in names are matched ignoring case, as the registry matches them.
        const auto is = [&name](std::string_view exporter) {
            return std::equal(name.begin(), name.end(), exporter.begin(), exporter.end(),
                              [](char a, char b) { return std::tolower(a) == std::tolower(b); });
        };
        if (is("buffer")) {
            files.push_back(fmt::format("{}/{}", dir, agent));
        } else if (is("node")) {
            files.push_back(fmt::format("{}/{}{}", dir, agent, xtel::node::file::file_suffix));
        }
    }
    return files.empty()
               ? fmt::format("telemetry {}", cfg.exporters_string())
               : fmt::format("telemetry {} -> {}", cfg.exporters_string(), fmt::join(files, ", "));
}

// ---- the target ---------------------------------------------------------------------------

/// The target's buffer: allocated by the agent (shared directly on this host) or registered
/// from the process's own memory.
class target_memory {
  public:
    target_memory(xtel::agent& a, const options& o) : agent_(a) {
        if (o.allocate_target) {
            require(a.allocate_memory(o.total, region_), "allocating the target buffer");
        } else {
            own_ = std::make_unique<host_buffer>(o.total);
            region_ = xtel::descriptor::dram(own_->data, o.total);
            require(a.register_memory(region_), "registering the target buffer");
        }
        fill(data(), o.total, target_seed(o));
    }
    ~target_memory() { (void)agent_.deregister_memory(region_); }

    std::byte* data() const { return static_cast<std::byte*>(region_.pointer()); }

  private:
    xtel::agent& agent_;
    std::unique_ptr<host_buffer> own_;
    xtel::descriptor region_;
};

/// Checks the target's buffer: the initiator's data in its first `written` bytes, its own
/// after them (a write that --duration stopped short wrote a part of the buffer only).
bool verify_target(const target_memory& m, const options& o, std::uint64_t written) {
    if (!does_write(o)) {
        written = 0;
    }
    auto bad = check(m.data(), 0, written, initiator_seed(o));
    if (!bad) {
        bad = check(m.data(), written, o.total, target_seed(o));
    }
    if (bad) {
        fmt::print("target: data differs at offset {} of {}\n", *bad, o.total);
        return false;
    }
    if (written == o.total) {
        fmt::print("target: verified {} bytes ({})\n", o.total,
                   does_write(o) ? "as the initiator wrote them" : "unchanged");
    } else {
        fmt::print(
            "target: verified {} bytes ({} as the initiator wrote them, the rest unchanged)\n",
            o.total, written);
    }
    return true;
}

void write_file_atomically(const std::string& path, const std::vector<std::byte>& bytes) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
        if (!f) {
            throw xtel::error(fmt::format("cannot write '{}'", tmp));
        }
    }
    std::filesystem::rename(tmp, path);
}

volatile std::sig_atomic_t stop_lingering = 0;

/// Keeps the agents up for --linger seconds (or until a signal), their telemetry flushed, so
/// that a scraper or a reader can look at them.
void linger(const options& o, std::initializer_list<xtel::agent*> agents) {
    if (o.linger_s <= 0) {
        return;
    }
    for (auto* a : agents) {
        a->flush_telemetry();
    }
    std::signal(SIGINT, [](int) { stop_lingering = 1; });
    std::signal(SIGTERM, [](int) { stop_lingering = 1; });
    fmt::print("lingering for {} s\n", o.linger_s);
    std::fflush(stdout);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(o.linger_s);
    while (!stop_lingering && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

/// What the notifications a target received said, by sender (--notify).
class notified_tally {
  public:
    /// Takes what `a` received since the last call.
    void take(xtel::agent& a) {
        batch_.clear();
        (void)a.get_notifications(batch_);
        for (const xtel::notification& n : batch_) {
            if (n.transfer) {
                made_counts& p = peers_[n.remote_agent];
                ++p.transfers;
                p.bytes += n.bytes;
            } else if (n.message.starts_with(done_prefix)) {
                made_counts c;
                const std::string rest = n.message.substr(done_prefix.size());
                if (std::sscanf(rest.c_str(), "%" SCNu64 " transfers, %" SCNu64 " bytes",
                                &c.transfers, &c.bytes) == 2) {
                    announced_[n.remote_agent] = c;
                }
            }
        }
    }

    /// Whether a sender announced its totals and every announcement has been matched.
    bool complete() const {
        return !announced_.empty() &&
               std::all_of(announced_.begin(), announced_.end(), [&](const auto& kv) {
                   const auto it = peers_.find(kv.first);
                   return it != peers_.end() && it->second.transfers == kv.second.transfers &&
                          it->second.bytes == kv.second.bytes;
               });
    }

    /// One line per sender, then the final line; true when they agree.
    bool report(const xtel::agent& a) const {
        std::uint64_t transfers = 0, bytes = 0;
        for (const auto& [peer, c] : peers_) {
            const auto it = announced_.find(peer);
            fmt::print("target: '{}' notified {} transfers, {} bytes (it announced {})\n", peer,
                       c.transfers, c.bytes,
                       it == announced_.end()
                           ? std::string("nothing")
                           : fmt::format("{} transfers, {} bytes", it->second.transfers,
                                         it->second.bytes));
            transfers += c.transfers;
            bytes += c.bytes;
        }
        const bool ok = complete();
        fmt::print(
            "target: notified of {} transfers, {} bytes by {} initiators; {} malformed; {}\n",
            transfers, bytes, peers_.size(), a.notifications().malformed,
            ok ? "one per transfer" : "NOT one per transfer");
        return ok;
    }

  private:
    std::vector<xtel::notification> batch_;
    std::map<std::string, made_counts> peers_;
    std::map<std::string, made_counts> announced_;
};

/// Polls a target's notifications until the tally is complete or `give_up`; then reports.
/// `initiator`, when in this process, is progressed too: its last send may wait for it.
bool await_notifications(xtel::agent& a,
                         notified_tally& tally,
                         std::chrono::steady_clock::time_point give_up,
                         xtel::agent* initiator = nullptr) {
    while (!tally.complete() && std::chrono::steady_clock::now() < give_up) {
        tally.take(a);
        if (initiator != nullptr) {
            initiator->progress();
        }
    }
    return tally.report(a);
}

/// What the initiator's done file says it wrote into the target from offset 0: all of it,
/// unless --duration stopped its first write short. An empty file (an initiator that says
/// nothing) means all.
std::uint64_t bytes_written_in(const std::string& done, const options& o) {
    std::ifstream f(done);
    std::uint64_t written = 0;
    if (!(f >> written)) {
        return o.total;
    }
    return std::min(written, o.total);
}

int run_target(const options& o) {
    auto a = xtel::make_agent(o.target_name);
    fmt::print("target '{}': {}\n", a->name(), flight_recorder_of(*a));
    target_memory memory(*a, o);
    std::vector<std::byte> blob;
    require(a->export_metadata(blob), "exporting metadata");
    const std::string done = o.metadata + ".done";
    std::filesystem::remove(done);
    write_file_atomically(o.metadata, blob);
    fmt::print("target: {} bytes ready; metadata in {}; waiting for {}\n", o.total, o.metadata,
               done);
    std::fflush(stdout);

    // Serve: some transports need the target's progress. Look for the done file now and then.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    notified_tally tally;
    for (std::uint64_t spins = 0;; ++spins) {
        a->progress();
        if ((spins & 1023) == 0) {
            if (o.notify) {
                tally.take(*a);  // the queue stays short while the initiator runs
            }
            struct stat st {};
            if (::stat(done.c_str(), &st) == 0) {
                break;
            }
            if (std::chrono::steady_clock::now() > give_up) {
                fmt::print(stderr, "target: no {} within {} s\n", done, o.timeout_s);
                return 1;
            }
        }
    }
    // The initiator's last notifications may still be on their way when its done file appears.
    const bool notified = !o.notify || await_notifications(*a, tally, give_up);
    const bool verified = verify_target(memory, o, bytes_written_in(done, o));
    linger(o, {a.get()});
    return verified && notified ? 0 : 1;
}

// ---- the initiator ------------------------------------------------------------------------

/// Runs one phase: every block once, `depth` transfers in flight, progress lines as it goes;
/// none is posted after `deadline` (--duration), so a phase may end early. `target`, when in
/// this process, is progressed too. The bytes moved, from offset 0 (the blocks are posted in
/// order and every one posted completes); nullopt when a transfer failed.
std::optional<std::uint64_t> run_phase(xtel::agent& a,
                                       xtel::agent* target,
                                       xtel::transfer_op op,
                                       const std::string& remote,
                                       const xtel::descriptor& local,
                                       const xtel::descriptor& remote_region,
                                       const options& o,
                                       std::chrono::steady_clock::time_point deadline) {
    const std::uint64_t blocks = (o.total + o.block - 1) / o.block;
    std::vector<xtel::transfer_handle> handles(blocks);
    static std::uint64_t created = 0;  // transfers this process created: the request ids
    std::string request_id;
    for (std::uint64_t b = 0; b < blocks; ++b) {
        const std::uint64_t off = b * o.block;
        const std::uint64_t n = std::min(o.block, o.total - off);
        const xtel::descriptor l{local.address + off, n, local.kind, local.device};
        const xtel::descriptor r{remote_region.address + off, n, remote_region.kind,
                                 remote_region.device};
        if (o.traceparent.empty()) {
            request_id = fmt::format("{}{}", o.request_id_prefix, created++);
        } else {
            request_id = o.traceparent;
        }
        const std::string message = o.notify ? fmt::format("block {}", b) : std::string();
        require(a.create_transfer(
                    op, std::span(&l, 1), std::span(&r, 1), remote, handles[b],
                    {.request_id = request_id, .notify = o.notify, .notification = message}),
                "creating a transfer");
    }
    const std::string_view name = op == xtel::transfer_op::write ? "write" : "read";
    const auto start = std::chrono::steady_clock::now();
    auto last_report = start;
    std::vector<std::uint64_t> in_flight;
    std::uint64_t next = 0, done_bytes = 0, completed = 0;
    bool ok = true;
    auto report = [&](bool final) {
        const auto now = std::chrono::steady_clock::now();
        const double s = std::chrono::duration<double>(now - start).count();
        fmt::print(
            "{:5s} {:6.1f}%  {:10.1f} MiB  {:7.2f} GB/s{}\n", name,
            100.0 * static_cast<double>(done_bytes) / static_cast<double>(o.total),
            static_cast<double>(done_bytes) / (1 << 20),
            s > 0 ? static_cast<double>(done_bytes) / s / 1e9 : 0.0,
            final ? fmt::format("  ({} transfers of {} bytes in {:.3f} s)", completed, o.block, s)
                  : "");
        last_report = now;
    };
    // --rate: the n-th transfer of the phase is due n / rate seconds after its start. With
    // nothing in flight the initiator sleeps until the next is due, so paced demos leave the
    // CPU to others (several pairs on one host measure their transport, not the scheduler).
    auto due = [&](std::uint64_t n) {
        return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(static_cast<double>(n) /
                                                         static_cast<double>(o.rate)));
    };
    // --duration: the clock is read every 64 posts, or before each paced one (--rate reads it
    // anyway), so that the limit costs nothing per transfer and is passed by at most 64
    // transfers' time. `last`: the blocks this phase moves, all until the deadline passes.
    std::uint64_t last = blocks;
    while (ok && completed < last) {
        if (o.rate != 0 && next < last && in_flight.empty()) {
            std::this_thread::sleep_until(std::min(due(next), deadline));
        }
        while (next < last && in_flight.size() < o.depth) {
            if (o.rate != 0 || next % 64 == 0) {
                const auto now = std::chrono::steady_clock::now();
                if (now >= deadline) {
                    last = next;
                    break;
                }
                if (o.rate != 0 && now < due(next)) {
                    break;
                }
            }
            const xtel::status st = a.post(handles[next]);
            if (st.ok()) {
                done_bytes += std::min(o.block, o.total - next * o.block);
                ++completed;
                made.transfers += o.notify ? 1 : 0;
                made.bytes += o.notify ? std::min(o.block, o.total - next * o.block) : 0;
            } else if (st.code() == xtel::status_code::in_progress) {
                in_flight.push_back(next);
            } else {
                fmt::print(stderr, "{} block {}: {}\n", name, next, st.to_string());
                ok = false;
                break;
            }
            ++next;
        }
        if (target != nullptr) {
            target->progress();
        }
        for (std::size_t i = 0; ok && i < in_flight.size();) {
            const std::uint64_t b = in_flight[i];
            const xtel::status st = a.poll(handles[b]);
            if (st.code() == xtel::status_code::in_progress) {
                ++i;
                continue;
            }
            if (!st.ok()) {
                fmt::print(stderr, "{} block {}: {}\n", name, b, st.to_string());
                ok = false;
                break;
            }
            done_bytes += std::min(o.block, o.total - b * o.block);
            ++completed;
            made.transfers += o.notify ? 1 : 0;
            made.bytes += o.notify ? std::min(o.block, o.total - b * o.block) : 0;
            in_flight[i] = in_flight.back();
            in_flight.pop_back();
        }
        if ((completed & 255) == 0 &&
            std::chrono::steady_clock::now() - last_report > std::chrono::milliseconds(500)) {
            report(false);
        }
    }
    if (ok) {
        report(true);
    }
    // Transfers still in flight after an error finish (or fail) before they are released.
    for (const std::uint64_t b : in_flight) {
        for (int spins = 0;
             a.poll(handles[b]).code() == xtel::status_code::in_progress && spins < 10'000'000;
             ++spins) {
            if (target != nullptr) {
                target->progress();
            }
        }
    }
    for (const auto h : handles) {
        (void)a.release(h);
    }
    if (!ok) {
        return std::nullopt;
    }
    return std::min(last * o.block, o.total);
}

/// What one pass did: whether it moved every block of each phase (--duration may stop it
/// short), and the bytes it read and wrote, each from offset 0.
struct pass_result {
    bool whole = true;
    std::uint64_t read = 0;
    std::uint64_t written = 0;
};

/// One pass: reads (the target's data into local, checked), then writes (the initiator's data
/// into the target). What the target holds before a pass depends on whether an earlier pass
/// wrote it. A read stopped at `deadline` checks what it read, and the pass writes nothing.
/// nullopt when a transfer or the check failed.
std::optional<pass_result> run_pass(xtel::agent& a,
                                    xtel::agent* target,
                                    const std::string& remote,
                                    const xtel::descriptor& local,
                                    const xtel::descriptor& region,
                                    std::byte* buffer,
                                    const options& o,
                                    std::uint64_t pass,
                                    std::chrono::steady_clock::time_point deadline) {
    pass_result r;
    if (does_read(o)) {
        const std::uint64_t expected =
            pass > 0 && does_write(o) ? initiator_seed(o) : target_seed(o);
        std::memset(buffer, 0, o.total);
        const auto read =
            run_phase(a, target, xtel::transfer_op::read, remote, local, region, o, deadline);
        if (!read) {
            return std::nullopt;
        }
        if (const auto bad = check(buffer, 0, *read, expected)) {
            fmt::print("initiator: read data differs at offset {}\n", *bad);
            return std::nullopt;
        }
        fmt::print("initiator: verified {} bytes read\n", *read);
        r.read = *read;
        if (*read < o.total) {
            r.whole = false;
            return r;
        }
    }
    if (does_write(o)) {
        fill(buffer, o.total, initiator_seed(o));
        const auto written =
            run_phase(a, target, xtel::transfer_op::write, remote, local, region, o, deadline);
        if (!written) {
            return std::nullopt;
        }
        r.written = *written;
        r.whole = *written == o.total;
    }
    return r;
}

/// What the initiator did: its exit status, and the bytes it wrote into the target from offset
/// 0 in all its passes (all of them once a write phase ran whole).
struct initiator_result {
    int rc = 0;
    std::uint64_t written = 0;
};

/// Runs passes until --duration has passed, stopping within a pass (one pass without it);
/// `check_target`, when the target is in this process, verifies its buffer after each pass,
/// given the bytes written into it so far.
initiator_result run_initiator(xtel::agent& a,
                               xtel::agent* target,
                               const std::vector<std::byte>& target_metadata,
                               const options& o,
                               const std::function<bool(std::uint64_t)>& check_target = {}) {
    std::string remote;
    require(a.load_remote_metadata(target_metadata, remote), "loading the target's metadata");
    std::vector<xtel::descriptor> regions;
    require(a.remote_regions(remote, regions), "listing the target's regions");
    const auto region = std::find_if(regions.begin(), regions.end(),
                                     [&](const auto& r) { return r.length >= o.total; });
    if (region == regions.end()) {
        fmt::print(stderr, "initiator: target '{}' registered no region of {} bytes\n", remote,
                   o.total);
        return {1, 0};
    }
    host_buffer buffer(o.total);
    const auto local = xtel::descriptor::dram(buffer.data, o.total);
    require(a.register_memory(local), "registering the initiator buffer");
    const auto start = std::chrono::steady_clock::now();
    const auto until = o.duration_s > 0 ? start + std::chrono::seconds(o.duration_s)
                                        : std::chrono::steady_clock::time_point::max();
    bool ok = true;
    bool whole = true;
    std::uint64_t passes = 0;
    std::uint64_t written = 0;  // from offset 0, in all passes: what the target holds of ours
    pass_result moved;          // in all passes
    do {
        const auto pass =
            run_pass(a, target, remote, local, *region, buffer.data, o, passes, until);
        ok = pass.has_value();
        if (ok) {
            written = std::max(written, pass->written);
            moved.read += pass->read;
            moved.written += pass->written;
            whole = pass->whole;
            ok = !check_target || check_target(written);
        }
        ++passes;
    } while (ok && whole && o.duration_s > 0 && std::chrono::steady_clock::now() < until);
    if (o.duration_s > 0) {
        // The bytes too: with the last pass stopped part-way they are not passes x --total.
        fmt::print("initiator: {} passes in {:.1f} s, {} bytes read, {} written, {}{}\n", passes,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                   moved.read, moved.written, ok ? "each verified" : "the last one failed",
                   ok && !whole ? " (the last one as far as --duration let it go)" : "");
    }
    if (o.notify) {
        require(a.send_notification(remote, fmt::format("{}{} transfers, {} bytes", done_prefix,
                                                        made.transfers, made.bytes)),
                "notifying the target of the totals");
        fmt::print("initiator: notified '{}' of {} transfers, {} bytes\n", remote, made.transfers,
                   made.bytes);
    }
    require(a.deregister_memory(local), "deregistering the initiator buffer");
    return {ok ? 0 : 1, does_write(o) ? written : 0};
}

std::vector<std::byte> wait_for_metadata(const options& o) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    while (!std::filesystem::exists(o.metadata)) {
        if (std::chrono::steady_clock::now() > give_up) {
            throw xtel::error(
                fmt::format("no metadata file {} within {} s (start the target "
                            "first)",
                            o.metadata, o.timeout_s));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream f(o.metadata, std::ios::binary);
    const std::vector<char> chars((std::istreambuf_iterator<char>(f)), {});
    std::vector<std::byte> blob(chars.size());
    std::memcpy(blob.data(), chars.data(), chars.size());
    return blob;
}

int run_remote_initiator(const options& o) {
    const auto blob = wait_for_metadata(o);
    auto a = xtel::make_agent(o.initiator_name);
    fmt::print("initiator '{}': {}\n", a->name(), flight_recorder_of(*a));
    const auto r = run_initiator(*a, nullptr, blob, o);
    // The bytes written, for the target's check: all of them unless --duration stopped the
    // first write short.
    const std::string written = std::to_string(r.written);
    std::vector<std::byte> text(written.size());
    std::memcpy(text.data(), written.data(), written.size());
    write_file_atomically(o.metadata + ".done", text);
    return r.rc;
}

/// With --traceparent, whether its trace's transfers become spans: the head sample decides it
/// from the trace id, for all of them at once, and at the default 0.01 it is one trace in a
/// hundred, so that a demo asked for a trace otherwise sends no span and says nothing of why.
void say_whether_traced(const options& o) {
    const auto context = xtel::trace::parse_traceparent(o.traceparent);
    const auto settings = xtel::trace::sampler_settings::from_env();
    const std::string trace = xtel::trace::to_hex(context->trace);
    if (xtel::trace::head_sampled(context->trace, xtel::trace::sample_threshold(settings.sample))) {
        fmt::print(
            "xfer_demo: trace {} is in the head sample ({}={:g}): every transfer of it "
            "becomes a span\n",
            trace, xtel::trace::env::trace_sample, settings.sample);
        return;
    }
    fmt::print(
        "xfer_demo: trace {} is not in the head sample ({}={:g}): only its failed "
        "transfers and those slower than {}={} us become spans; {}=1 makes every one a "
        "span\n",
        trace, xtel::trace::env::trace_sample, settings.sample, xtel::trace::env::trace_slow_us,
        settings.slow_us, xtel::trace::env::trace_sample);
}

int run_both(const options& o) {
    auto target = xtel::make_agent(o.target_name);
    auto initiator = xtel::make_agent(o.initiator_name);
    fmt::print("target '{}': {}\ninitiator '{}': {}\n", target->name(), flight_recorder_of(*target),
               initiator->name(), flight_recorder_of(*initiator));
    target_memory memory(*target, o);
    std::vector<std::byte> blob;
    require(target->export_metadata(blob), "exporting metadata");
    int rc = run_initiator(*initiator, target.get(), blob, o, [&](std::uint64_t written) {
                 return verify_target(memory, o, written);
             }).rc;
    if (o.notify) {
        notified_tally tally;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
        if (!await_notifications(*target, tally, give_up, initiator.get())) {
            rc = 1;
        }
    }
    linger(o, {target.get(), initiator.get()});
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    try {
        fmt::print("xfer_demo: {} bytes in blocks of {}, op {}, {} in flight\n", o.total, o.block,
                   o.op, o.depth);
        if (!o.traceparent.empty() && o.role != "target") {
            say_whether_traced(o);
        }
        if (o.role == "target") {
            return run_target(o);
        }
        if (o.role == "initiator") {
            return run_remote_initiator(o);
        }
        return run_both(o);
    } catch (const xtel::config_error& e) {
        fmt::print(stderr, "xfer_demo: {}\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "xfer_demo: {}\n", e.what());
        return 1;
    }
}
