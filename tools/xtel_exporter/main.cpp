// xtel-exporter: one per node, serving on one /metrics the metric state every agent of the node
// publishes into `<dir>/<agent name>.metrics` (the node exporter; docs/node-format.md), and its
// own health. docs/deployment.md has the options, the labels and the stale rule.

#include <pthread.h>
#include <signal.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.hpp"
#include "exporters/prometheus/negotiate.hpp"
#include "exporters/prometheus/process_metrics.hpp"
#include "exporters/prometheus/prometheus_text.hpp"
#include "http/gzip.hpp"
#include "http/request.hpp"
#include "http/server.hpp"
#include "node/node_collector.hpp"
#include "xtel/error.hpp"
#include "xtel/host_port.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/parse.hpp"

namespace {

using namespace xtel;
using clock_type = std::chrono::steady_clock;

/// sysexits.h: the command was used incorrectly.
constexpr int exit_usage = 64;
/// The body's gzip level: the fastest, as the agents' endpoint uses (every scrape renders).
constexpr int gzip_level = 1;
/// Scrapes closer together than this share one reading of the files.
constexpr auto min_refresh_interval = std::chrono::milliseconds(200);
/// The directory is listed again this often (new agents, deleted files).
constexpr auto scan_interval = std::chrono::seconds(1);

constexpr std::string_view usage =
    "Usage: xtel-exporter [--dir DIR] [--listen HOST:PORT] [--stale-ttl SECONDS]\n"
    "\n"
    "Serves on one /metrics the metrics every agent of this node publishes into\n"
    "DIR/<agent name>.metrics (NIXL_TELEMETRY_EXPORTER=node).\n"
    "\n"
    "  --dir DIR             the agents' NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH (default /dev/shm)\n"
    "  --listen HOST:PORT    where to serve /metrics (default 127.0.0.1:9465; port 0 picks one)\n"
    "  --stale-ttl SECONDS   how long an agent that has stopped is still served (default 60)\n"
    "  --help                this text\n";

struct options {
    std::filesystem::path dir = "/dev/shm";
    host_port listen = host_port::parse("--listen", "127.0.0.1:9465");
    std::uint64_t stale_ttl_s = 60;
    bool help = false;
};

/// A command line that cannot be run; what() names the option, the value and what is accepted.
class usage_error : public error {
  public:
    using error::error;
};

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            o.help = true;
            continue;
        }
        std::string_view value;
        bool has_value = false;
        if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        if (arg != "--dir" && arg != "--listen" && arg != "--stale-ttl") {
            throw usage_error(fmt::format(
                "'{}' is not an option: expected --dir, --listen, --stale-ttl or --help", arg));
        }
        if (!has_value) {
            if (i + 1 >= argc) {
                throw usage_error(fmt::format("{} needs a value", arg));
            }
            value = argv[++i];
        }
        try {
            if (arg == "--dir") {
                o.dir = parse::existing_directory("--dir", value);
            } else if (arg == "--listen") {
                o.listen = host_port::parse("--listen", value);
            } else {
                o.stale_ttl_s = parse::unsigned_integer("--stale-ttl", value, 0, 365 * 86400);
            }
        } catch (const config_error& e) {
            throw usage_error(e.what());
        }
    }
    return o;
}

constexpr auto gauge = metrics::metric_type::gauge;
constexpr auto counter = metrics::metric_type::counter;

metrics::family_spec spec(std::string name, std::string help, metrics::metric_type type) {
    metrics::family_spec s;
    s.name = std::move(name);
    s.help = std::move(help);
    s.type = type;
    return s;
}

/// Kept in microseconds, shown in seconds.
metrics::family_spec seconds_summary(std::string name, std::string help) {
    auto s = spec(std::move(name), std::move(help), metrics::metric_type::summary);
    s.decimals = 6;
    s.unit = "seconds";
    return s;
}

/// The node's agents and the exporter's own health, rendered for a scrape. Called from the HTTP
/// server's thread (scrapes) and the main thread (the scan timer), so everything is behind
/// one mutex.
class node_metrics {
  public:
    explicit node_metrics(const options& o)
        : collector_(o.dir, std::chrono::seconds(o.stale_ttl_s)),
          agents_(store_.add_family(
              spec("xtel_exporter_agents", "Agents whose metrics are served now", gauge))),
          seen_(store_.add_family(spec("xtel_exporter_agents_seen_total",
                                       "Agents (node files and their writers) seen so far",
                                       counter))),
          errors_(store_.add_family(
              spec("xtel_exporter_snapshot_read_errors_total",
                   "Node files not served: not a node file, damaged, or undecodable",
                   counter))),
          duration_(store_.add_family(
              seconds_summary("xtel_exporter_scrape_duration_seconds",
                              "Time to read the node files and render /metrics"))) {
        // Made now, so that the first scrape shows them at 0 too.
        for (const auto f : {agents_, seen_, errors_, duration_}) {
            series(f);
        }
    }

    /// Lists the directory and reads every file, unless that was done less than
    /// min_refresh_interval ago (or `force`).
    void refresh(bool force = false) {
        const std::lock_guard lock(mutex_);
        refresh_locked(force);
    }

    /// The body of a scrape in representation `r`.
    std::shared_ptr<const std::string> render(detail::representation r) {
        const auto start = clock_type::now();
        std::vector<std::shared_ptr<const metrics::snapshot>> snapshots;
        {
            const std::lock_guard lock(mutex_);
            refresh_locked(false);
            snapshots = agents_served_;
            store_.set(series(agents_), collector_.served());
            store_.set(series(seen_), collector_.seen_total());
            store_.set(series(errors_), collector_.read_errors_total());
            snapshots.push_back(std::make_shared<const metrics::snapshot>(take_snapshot(store_)));
        }
        snapshots.push_back(std::make_shared<const metrics::snapshot>(detail::process_snapshot()));
        auto body = std::make_shared<std::string>();
        detail::render(snapshots, *body, r.format);
        if (r.gzip) {
            *body = detail::http::gzip(*body, gzip_level);
        }
        const auto us =
            std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start);
        const std::lock_guard lock(mutex_);
        store_.observe(series(duration_), static_cast<std::uint64_t>(us.count()));
        return body;
    }

  private:
    /// The one series of a family without labels.
    metrics::series_ref series(metrics::family_id f) {
        return store_.series_of(f, std::span<const std::string_view>{});
    }

    void refresh_locked(bool force) {
        const auto now = clock_type::now();
        if (!force && refreshed_ && now - *refreshed_ < min_refresh_interval) {
            return;
        }
        collector_.scan();
        agents_served_ = collector_.refresh(now);
        refreshed_ = now;
    }

    std::mutex mutex_;
    detail::node_collector collector_;
    std::vector<std::shared_ptr<const metrics::snapshot>> agents_served_;
    std::optional<clock_type::time_point> refreshed_;
    metrics::metric_store store_;
    metrics::family_id agents_;
    metrics::family_id seen_;
    metrics::family_id errors_;
    metrics::family_id duration_;
};

/// Serves until SIGINT or SIGTERM, refreshing every scan_interval meanwhile.
int serve(const options& o) {
    // Blocked before the server's thread starts, so that it inherits the mask and the signals
    // come only to sigtimedwait below.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);

    node_metrics node(o);
    node.refresh(true);
    detail::http_server server(
        o.listen, "/metrics", "Accept, Accept-Encoding",
        [&node](const detail::http::request_head& head) {
            const detail::representation r =
                detail::negotiate(head.accept.values(), head.accept_encoding.values());
            return detail::http_entity{node.render(r), detail::content_type(r.format), r.gzip};
        });
    std::fprintf(stderr, "xtel-exporter: serving http://%s/metrics\n",
                 server.bound().to_string().c_str());
    std::fflush(stderr);

    const auto interval = std::chrono::duration_cast<std::chrono::seconds>(scan_interval);
    const timespec wait{static_cast<std::time_t>(interval.count()), 0};
    for (;;) {
        const int sig = ::sigtimedwait(&stop, nullptr, &wait);
        if (sig == SIGINT || sig == SIGTERM) {
            std::fprintf(stderr, "xtel-exporter: stopping (signal %d)\n", sig);
            return 0;
        }
        node.refresh(true);
    }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel-exporter: %s (--help lists the options)\n", e.what());
        return exit_usage;
    }
    if (o.help) {
        std::fwrite(usage.data(), 1, usage.size(), stdout);
        return 0;
    }
    try {
        return serve(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel-exporter: %s\n", e.what());
        return 1;
    }
}
