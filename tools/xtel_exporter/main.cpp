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

#include "dir_watch.hpp"
#include "exporters/prometheus/negotiate.hpp"
#include "http/request.hpp"
#include "http/server.hpp"
#include "node_metrics.hpp"
#include "options.hpp"
#include "run_as.hpp"
#include "xtel/error.hpp"
#if XTEL_HAVE_REMOTE_WRITE
#include "node/remote_write.hpp"
#endif

namespace {

using namespace xtel;
using namespace xtel::exporter_program;
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

/// The remote writer and when it pushes next; nothing when --remote-write is not given.
class pusher {
  public:
    explicit pusher(const options& o) : interval_(o.remote_write_interval) {
#if XTEL_HAVE_REMOTE_WRITE
        if (!o.remote_write_url.empty()) {
            writer_ = std::make_unique<node::remote_writer>(o.remote_write_url);
        }
#endif
    }

    bool active() const noexcept {
#if XTEL_HAVE_REMOTE_WRITE
        return writer_ != nullptr;
#else
        return false;
#endif
    }

    /// The writer's counters, for the health families; empty when not active.
    remote_write_probe probe() const {
#if XTEL_HAVE_REMOTE_WRITE
        if (writer_) {
            const node::remote_writer* w = writer_.get();
            return [w] {
                return remote_write_counts{w->sent(), w->failed_attempts(), w->dropped(),
                                           w->rejected(), w->queued()};
            };
        }
#endif
        return {};
    }

    /// Sets the labels every pushed series gets: --remote-write-label's, and instance as
    /// <host name>:<port of `bound`> unless given; a label given with an empty value is left
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
            char host[256] = {};
            ::gethostname(host, sizeof host - 1);
            labels_.push_back(metrics::label{"instance", fmt::format("{}:{}", host, bound.port)});
        }
    }

    /// When the next push is due; nullopt when not active.
    std::optional<clock_type::time_point> due() const noexcept {
        return active() ? std::optional(next_) : std::nullopt;
    }

    /// Pushes `source`'s series, read afresh, if due at `now`.
    void push_if_due(node_metrics& source, clock_type::time_point now) {
        if (!active() || now < next_) {
            return;
        }
        // On the interval's grid, unless this push ran so late that the next would be due
        // already: then an interval from now.
        next_ += interval_;
        if (next_ <= now) {
            next_ = now + interval_;
        }
#if XTEL_HAVE_REMOTE_WRITE
        const auto all = source.snapshots(true);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
        writer_->push(node::encode_write_request(all, ms, labels_));
#else
        (void)source;
#endif
    }

  private:
    std::vector<metrics::label> labels_;
    std::chrono::seconds interval_;
    clock_type::time_point next_ = clock_type::now();
#if XTEL_HAVE_REMOTE_WRITE
    std::unique_ptr<node::remote_writer> writer_;
#endif
};

/// Milliseconds from `now` to `t` for poll(2), at least 0.
int ms_until(clock_type::time_point t, clock_type::time_point now) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
    return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 3'600'000));
}

/// Serves until SIGINT or SIGTERM, meanwhile refreshing when the directory changes (and every
/// rescan interval) and pushing every remote-write interval.
int serve(const options& o, const std::optional<account>& user) {
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
    pusher push(o);
    node_metrics node(o.dir, std::chrono::seconds(o.stale_ttl_s), push.probe());
    detail::http_server server(
        o.listen, "/metrics", "Accept, Accept-Encoding",
        [&node](const detail::http::request_head& head) {
            const detail::representation r =
                detail::negotiate(head.accept.values(), head.accept_encoding.values());
            return detail::http_entity{node.render(r), detail::content_type(r.format), r.gzip};
        });
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
    options o;
    std::optional<account> user;
    try {
        o = parse_options(argc, argv);
        if (!o.help && !o.user.empty()) {
            user = account_to_run_as(o.user);
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
        return serve(o, user);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel-exporter: %s\n", e.what());
        return 1;
    }
}
