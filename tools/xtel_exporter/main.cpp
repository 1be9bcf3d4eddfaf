// xtel-exporter: one per node, serving on one /metrics the metric state every agent of the node
// publishes into `<dir>/<agent name>.metrics` (the node exporter; docs/node-format.md), and its
// own health; with --remote-write, pushing the same series to a Prometheus remote-write
// receiver. docs/deployment.md has the options, the labels and the stale rule.

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
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dir_watch.hpp"
#include "node_metrics.hpp"
#include "options.hpp"
#include "run_as.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/version.hpp"
#include "xtel/http/request.hpp"
#include "xtel/http/server.hpp"
#include "xtel/metrics/negotiate.hpp"
#include "xtel/push/otlp_config.hpp"
#include "xtel/push/otlp_environment.hpp"
#if XTEL_HAVE_PUSH
#include "xtel/push/remote_write.hpp"
#endif

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

/// When a push on an interval is next due.
class schedule {
  public:
    explicit schedule(clock_type::duration interval) : interval_(interval) {}

    clock_type::time_point due() const noexcept { return next_; }

    /// Whether a push is due at `now`; if so, moves on to the next.
    bool take(clock_type::time_point now) noexcept {
        if (now < next_) {
            return false;
        }
        // On the interval's grid, unless this push ran so late that the next would be due
        // already: then an interval from now.
        next_ += interval_;
        if (next_ <= now) {
            next_ = now + interval_;
        }
        return true;
    }

  private:
    clock_type::duration interval_;
    clock_type::time_point next_ = clock_type::now();
};

std::uint64_t epoch_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

std::string host_name() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

/// The pushers --remote-write and OTLP ask for, and when each pushes next.
class pushers {
  public:
    pushers(const options& o, std::optional<push::otlp_options> otlp)
        : remote_write_schedule_(o.remote_write_interval),
          otlp_schedule_(otlp ? otlp->interval : std::chrono::seconds(1)) {
#if XTEL_HAVE_PUSH
        if (!o.remote_write_url.empty()) {
            remote_write_ = std::make_unique<push::remote_writer>(o.remote_write_url);
        }
        if (otlp) {
            otlp_ = std::make_unique<push::otlp_pusher>(std::move(*otlp));
        }
#else
        (void)otlp;
#endif
    }

    /// Their counters, for the health families.
    std::vector<push_health> health() const {
        std::vector<push_health> out;
#if XTEL_HAVE_PUSH
        if (remote_write_) {
            const push::http_pusher* w = remote_write_.get();
            out.push_back({"remote_write", "Remote-write", [w] { return counts(*w); }, false});
        }
        if (otlp_) {
            const push::otlp_pusher* e = otlp_.get();
            out.push_back({"otlp", "OTLP",
                           [e] {
                               push_counts c = counts(e->sender());
                               c.rejected_points = e->rejected_points();
                               return c;
                           },
                           true});
        }
#endif
        return out;
    }

    /// Sets the labels every remote-written series gets: --remote-write-label's, and instance
    /// as <host name>:<port of `bound`> unless given; a label given with an empty value is left
    /// out. Called once the port is bound.
    void label(const options& o, const host_port& bound) {
        labels_.clear();
        bool instance = false;
        for (const auto& [name, value] : o.remote_write_labels) {
            instance = instance || name == "instance";
            if (!value.empty()) {
                labels_.push_back(metrics::label{name, value});
            }
        }
        if (!instance) {
            labels_.push_back(
                metrics::label{"instance", fmt::format("{}:{}", host_name(), bound.port)});
        }
    }

    /// When the next push is due; nullopt when there is nothing to push.
    std::optional<clock_type::time_point> due() const noexcept {
        std::optional<clock_type::time_point> out;
#if XTEL_HAVE_PUSH
        if (remote_write_) {
            out = remote_write_schedule_.due();
        }
        if (otlp_) {
            out = out ? std::min(*out, otlp_schedule_.due()) : otlp_schedule_.due();
        }
#endif
        return out;
    }

    /// Pushes `source`'s series, read afresh, to each pusher that is due at `now`.
    void push_if_due(node_metrics& source, clock_type::time_point now) {
#if XTEL_HAVE_PUSH
        const bool remote_write = remote_write_ && remote_write_schedule_.take(now);
        const bool otlp = otlp_ && otlp_schedule_.take(now);
        if (!remote_write && !otlp) {
            return;
        }
        const auto all = source.snapshots(true);
        const std::uint64_t ns = epoch_ns();
        if (remote_write) {
            remote_write_->push(push::encode_write_request(
                all, static_cast<std::int64_t>(ns / 1'000'000), labels_));
        }
        if (otlp) {
            otlp_->push(all, ns);
        }
#else
        (void)source;
        (void)now;
#endif
    }

  private:
#if XTEL_HAVE_PUSH
    static push_counts counts(const push::http_pusher& p) {
        return {p.sent(), p.failed_attempts(), p.dropped(), p.rejected(), p.queued(), 0};
    }
    std::unique_ptr<push::remote_writer> remote_write_;
    std::unique_ptr<push::otlp_pusher> otlp_;
#endif
    std::vector<metrics::label> labels_;
    schedule remote_write_schedule_;
    schedule otlp_schedule_;
};

/// The OTLP settings the variables and flags ask for; nullopt: no OTLP. Throws usage_error.
std::optional<push::otlp_options> otlp_settings(const options& o) {
    try {
#if XTEL_HAVE_PUSH
        return push::otlp_options_from(process_env, o.otlp, host_name());
#else
        for (const std::string_view var : push::otel_env::endpoints) {
            if (o.otlp.endpoint || process_env(var)) {
                throw usage_error(
                    "OTLP is not in this build of xtel-exporter: it was built with "
                    "XTEL_PUSH=OFF (protobuf and libcurl are needed for it)");
            }
        }
        return std::nullopt;
#endif
    } catch (const config_error& e) {
        throw usage_error(e.what());
    }
}

/// Milliseconds from `now` to `t` for poll(2), at least 0.
int ms_until(clock_type::time_point t, clock_type::time_point now) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
    return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 3'600'000));
}

/// Serves until SIGINT or SIGTERM, meanwhile refreshing when the directory changes (and every
/// rescan interval) and pushing every remote-write interval.
int serve(const options& o,
          const std::optional<account>& user,
          std::optional<push::otlp_options> otlp) {
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

    // Declared before the server, whose thread reads the writer's counters: it goes after.
    pushers push(o, std::move(otlp));
    node_metrics node({.dir = o.dir,
                       .stale_ttl = std::chrono::seconds(o.stale_ttl_s),
                       .program = "xtel-exporter",
                       .allowed_uids = o.allowed_uids,
                       .max_file_bytes = o.max_file_bytes,
                       .max_series = o.max_series,
                       .reserved_families = {}},
                      push.health());
    http::server server(
        o.listen, "/metrics", "Accept, Accept-Encoding", [&node](const http::request_head& head) {
            const metrics::representation r =
                metrics::negotiate(head.accept.values(), head.accept_encoding.values());
            return http::entity{node.render(r), metrics::content_type(r.format), r.gzip};
        });
    node.count_endpoint([&server] { return server.stats(); });
    // glibc switches every thread, the server's and the writer's included.
    if (user) {
        run_as(*user);
    }
    push.label(o, server.bound());
    node.start();
    dir_watch watch(o.dir);
    std::fprintf(stderr, "xtel-exporter: serving http://%s/metrics\n",
                 server.bound().to_string().c_str());
    std::fflush(stderr);

    auto next_scan = clock_type::now();
    for (;;) {
        auto now = clock_type::now();
        auto wake = next_scan;
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
    try {
        o = parse_options(argc, argv);
        if (!o.help && !o.user.empty()) {
            user = account_to_run_as(o.user);
        }
        if (!o.help) {
            otlp = otlp_settings(o);
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
        return serve(o, user, std::move(otlp));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel-exporter: %s\n", e.what());
        return 1;
    }
}
