// xtel-exporter: one per node, serving on one /metrics the metric model every agent of the node
// publishes into `<dir>/<agent name>.metrics` (the node exporter; docs/node-format.md), and its
// own health; with --remote-write, pushing the same series to a Prometheus remote-write
// receiver. docs/deployment.md has the options, the labels and the stale rule.

#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dir_watch.hpp"
#include "node_metrics.hpp"
#include "options.hpp"
#include "pushers.hpp"
#include "run_as.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/core/version.hpp"
#include "xtel/http/negotiate.hpp"
#include "xtel/http/request.hpp"
#include "xtel/http/server.hpp"
#include "xtel/nixl/buffer_rings.hpp"
#include "xtel/nixl/multiproc_stores.hpp"
#include "xtel/node/file.hpp"
#include "xtel/node/scanner.hpp"
#include "xtel/push/otlp_config.hpp"

namespace {

using namespace xtel;
using namespace xtel::xtel_exporter;
using clock_type = std::chrono::steady_clock;

/// The directory is listed again this often while the watch works: the fallback for what
/// inotify cannot see (another machine's changes on a shared file system).
constexpr auto rescan_interval_watched = std::chrono::seconds(5);
/// ... and this often when there is no watch.
constexpr auto rescan_interval_unwatched = std::chrono::seconds(1);
/// A change the watch reported is looked at again this much later: the kernel reports a
/// writer's close (IN_CLOSE_WRITE) just before it drops the writer's lock, by which a reader
/// tells that the writer is gone.
constexpr auto follow_up = std::chrono::milliseconds(250);

/// Milliseconds from `now` to `t` for poll(2), at least 0.
int ms_until(clock_type::time_point t, clock_type::time_point now) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
    return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 3'600'000));
}

/// What the collector serves, as the options say.
node::collector::settings collector_settings(const options& o) {
    return {.dir = o.dir,
            .stale_ttl = std::chrono::seconds(o.stale_ttl_s),
            .program = "xtel-exporter",
            .allowed_uids = o.allowed_uids,
            .max_file_bytes = o.max_file_bytes,
            .max_series = o.max_series,
            .reserved_families = {},
            .families = o.metrics};
}

/// The NIXL BUFFER directory's reader, as the options say; null without --nixl-buffer-dir.
std::unique_ptr<nixl::buffer_rings> nixl_rings(const options& o) {
    if (o.nixl_buffer_dir.empty()) {
        return nullptr;
    }
    // The models are configured from this process's environment, as an agent's from its own;
    // the rank is the agent's, which its ring does not say.
    metrics::agent_metrics_settings model = metrics::agent_metrics_settings::from_env();
    model.rank = {};
    return std::make_unique<nixl::buffer_rings>(
        nixl::buffer_rings::settings{.dir = o.nixl_buffer_dir,
                                     .program = "xtel-exporter",
                                     .allowed_uids = o.allowed_uids,
                                     .model = std::move(model),
                                     .families = o.metrics});
}

/// The NIXL prometheus_mp directory's reader, as the options say; null without
/// --nixl-multiproc-dir.
std::unique_ptr<nixl::multiproc_stores> nixl_stores(const options& o) {
    if (o.nixl_multiproc_dir.empty()) {
        return nullptr;
    }
    // NIXL_TELEMETRY_ENABLED_METRICS of this process's environment narrows the NIXL set served.
    return std::make_unique<nixl::multiproc_stores>(
        nixl::multiproc_stores::settings{.dir = o.nixl_multiproc_dir,
                                         .program = "xtel-exporter",
                                         .allowed_uids = o.allowed_uids,
                                         .model = metrics::agent_metrics_settings::from_env(),
                                         .families = o.metrics});
}

/// One line when the listing node.start() made has no node file: an empty or mistyped --dir
/// would otherwise serve no agent silently. The directory is listed by the scanner alone.
void warn_if_no_agent(const node::scanner& files, const std::filesystem::path& dir) {
    const std::shared_ptr<const node::listing> listed = files.latest();
    if (listed != nullptr && !listed->of(node::file_kind::node_file).empty()) {
        return;
    }
    const std::string shown = parse::escape_controls(dir.string());
    xtel::log(log_level::warning,
              fmt::format("--dir {} holds no node file (<agent name>{}) yet: no agent is "
                          "served until one appears there (an agent writes one with "
                          "NIXL_TELEMETRY_EXPORTER=node and "
                          "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH={})",
                          shown, node::file::file_suffix, shown));
}

/// Serves until SIGINT or SIGTERM, meanwhile refreshing when the directory changes (and every
/// rescan interval) and pushing every remote-write interval.
int serve(const options& o,
          const std::optional<account>& user,
          std::optional<push::otlp_options> otlp,
          std::optional<push::otlp_trace_options> traces) {
    // Blocked before any thread starts, so that every thread inherits the mask and the signals
    // come only to the signalfd below.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    const int signals = ::signalfd(-1, &stop, SFD_CLOEXEC);
    if (signals < 0) {
        throw error(std::string("signalfd failed: ") + std::strerror(errno));
    }

    const node::collector::settings collecting = collector_settings(o);
    // The directory's one listing: the collector makes it at each refresh, the span export reads
    // the span rings of the latest. Declared first: the readers of it go before it.
    node::scanner files(node::collector::scanner_settings(collecting, traces.has_value()));
    // Declared before the server, whose thread reads the writer's counters: it goes after.
    pushers push(o, files, std::move(otlp), std::move(traces));
    // Declared before node, which reads it.
    const std::unique_ptr<nixl::buffer_rings> rings = nixl_rings(o);
    const std::unique_ptr<nixl::multiproc_stores> stores = nixl_stores(o);
    node_metrics node(collecting, files, push.health(), push.span_health(), o.compat_names);
    node.serve_nixl(rings.get(), stores.get());
    http::server server(
        o.listen, "/metrics", "Accept, Accept-Encoding",
        [&node](const http::request_head& head) { return node.answer(http::negotiate(head)); }, {},
        http::server::start::on_serve);
    node.count_endpoint([&server] { return server.stats(); });
    // glibc switches every thread, the server's and the writer's included.
    if (user) {
        run_as(*user);
    }
    push.label(o, server.bound());
    node.start();
    // Only now: a scrape that came the moment the port opened would have found no agent yet.
    server.serve();
    dir_watch watch(files);
    warn_if_no_agent(files, o.dir);
    std::fprintf(stderr, "xtel-exporter: serving http://%s/metrics\n",
                 server.bound().to_string().c_str());
    std::fflush(stderr);

    auto next_scan = clock_type::now();
    for (;;) {
        auto now = clock_type::now();
        auto wake = next_scan;
        if (const auto due = node.drain_nixl_rings(now)) {
            wake = std::min(wake, *due);
        }
        if (const auto due = push.due()) {
            wake = std::min(wake, *due);
        }
        pollfd fds[2] = {{signals, POLLIN, 0}, {watch.fd(), POLLIN, 0}};
        const int ready = ::poll(fds, 2, ms_until(wake, now));
        if (ready < 0 && errno != EINTR) {
            throw error(std::string("poll failed: ") + std::strerror(errno));
        }
        if ((fds[0].revents & POLLIN) != 0) {
            signalfd_siginfo info{};
            if (::read(signals, &info, sizeof info) == sizeof info) {
                std::fprintf(stderr, "xtel-exporter: stopping (signal %u)\n", info.ssi_signo);
                ::close(signals);
                return 0;
            }
        }
        now = clock_type::now();
        const bool changed = (fds[1].revents & POLLIN) != 0 && watch.changed();
        if (changed || now >= next_scan) {
            node.refresh(true);
            next_scan = now + (changed            ? follow_up
                               : watch.watching() ? rescan_interval_watched
                                                  : rescan_interval_unwatched);
        }
        push.push_if_due(node, now);
    }
}

}  // namespace

int main(int argc, char** argv) {
    // Its log lines, and the library's in it, read "xtel-exporter: <level>: ...".
    xtel::set_log_program("xtel-exporter");
    // One malloc arena, unless the environment chose: snapshots are decoded on the refreshing
    // thread and bodies rendered on the server's, and glibc keeps what a thread frees in that
    // thread's arena, resident. With 64 agents of 1,000 native series (bench/node_scale.sh)
    // one arena holds 86 MiB where the default held 110 MiB; the exporter's few threads allocate
    // too rarely to contend for it.
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) {
        ::mallopt(M_ARENA_MAX, 1);
    }
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--version") {
            std::printf("xtel-exporter %.*s\n", static_cast<int>(xtel::version().size()),
                        xtel::version().data());
            return 0;
        }
    }
    options o;
    std::optional<account> user;
    std::optional<push::otlp_options> otlp;
    std::optional<push::otlp_trace_options> traces;
    try {
        o = parse_options(argc, argv);
        if (!o.help && !o.user.empty()) {
            user = account_to_run_as(o.user);
        }
        if (!o.help) {
            otlp = pushers::otlp_settings(o);
            traces = pushers::trace_settings(o);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel-exporter: %s (--help lists the options)\n", e.what());
        return exit_usage;
    }
    if (o.help) {
        const auto text = usage();
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    try {
        return serve(o, user, std::move(otlp), std::move(traces));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel-exporter: %s\n", e.what());
        return 1;
    }
}
