#include "node_metrics.hpp"

#include <span>
#include <string_view>

#include "exporters/prometheus/process_metrics.hpp"
#include "exporters/prometheus/prometheus_text.hpp"
#include "http/gzip.hpp"

namespace xtel::exporter_program {

namespace {

/// The body's gzip level: the fastest, as the agents' endpoint uses (every scrape renders).
constexpr int gzip_level = 1;
/// Scrapes closer together than this share one reading of the files.
constexpr auto min_refresh_interval = std::chrono::milliseconds(200);

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

}  // namespace

node_metrics::node_metrics(const std::filesystem::path& dir,
                           clock::duration stale_ttl,
                           remote_write_probe remote_write)
    : collector_(dir, stale_ttl),
      agents_(store_.add_family(
          spec("xtel_exporter_agents", "Agents whose metrics are served now", gauge))),
      seen_(store_.add_family(spec("xtel_exporter_agents_seen_total",
                                   "Agents (node files and their writers) seen so far",
                                   counter))),
      errors_(
          store_.add_family(spec("xtel_exporter_snapshot_read_errors_total",
                                 "Node files not served: not a node file, damaged, or undecodable",
                                 counter))),
      duration_(
          store_.add_family(seconds_summary("xtel_exporter_scrape_duration_seconds",
                                            "Time to read the node files and render /metrics"))),
      remote_write_(std::move(remote_write)) {
    if (remote_write_) {
        remote_write_families_ = remote_write_families{
            store_.add_family(spec("xtel_exporter_remote_write_requests_sent_total",
                                   "Remote-write requests the receiver took (2xx)", counter)),
            store_.add_family(spec("xtel_exporter_remote_write_failed_attempts_total",
                                   "Remote-write attempts that failed and are retried: "
                                   "connection errors, 5xx, 429",
                                   counter)),
            store_.add_family(
                spec("xtel_exporter_remote_write_requests_dropped_total",
                     "Remote-write requests dropped unsent because the queue was full", counter)),
            store_.add_family(spec("xtel_exporter_remote_write_requests_rejected_total",
                                   "Remote-write requests the receiver refused for good (4xx)",
                                   counter)),
            store_.add_family(spec(
                "xtel_exporter_remote_write_requests_queued",
                "Remote-write requests waiting to be sent, the one in flight included", gauge))};
    }
    // Made now, so that the first scrape shows them at 0 too.
    for (const auto f : {agents_, seen_, errors_, duration_}) {
        series(f);
    }
    if (remote_write_families_) {
        const auto& r = *remote_write_families_;
        for (const auto f : {r.sent, r.failed_attempts, r.dropped, r.rejected, r.queued}) {
            series(f);
        }
    }
}

void node_metrics::start() {
    const std::lock_guard lock(mutex_);
    started_ = true;
    refresh_locked(true);
}

void node_metrics::refresh(bool force) {
    const std::lock_guard lock(mutex_);
    refresh_locked(force);
}

std::vector<std::shared_ptr<const metrics::snapshot>> node_metrics::snapshots(bool force_refresh) {
    std::vector<std::shared_ptr<const metrics::snapshot>> out;
    {
        const std::lock_guard lock(mutex_);
        refresh_locked(force_refresh);
        out = agents_served_;
        store_.set(series(agents_), collector_.served());
        store_.set(series(seen_), collector_.seen_total());
        store_.set(series(errors_), collector_.read_errors_total());
        if (remote_write_families_) {
            const remote_write_counts c = remote_write_();
            const auto& r = *remote_write_families_;
            store_.set(series(r.sent), c.sent);
            store_.set(series(r.failed_attempts), c.failed_attempts);
            store_.set(series(r.dropped), c.dropped);
            store_.set(series(r.rejected), c.rejected);
            store_.set(series(r.queued), c.queued);
        }
        out.push_back(std::make_shared<const metrics::snapshot>(take_snapshot(store_)));
    }
    out.push_back(std::make_shared<const metrics::snapshot>(detail::process_snapshot()));
    return out;
}

std::shared_ptr<const std::string> node_metrics::render(detail::representation r) {
    const auto start = clock::now();
    const auto all = snapshots();
    auto body = std::make_shared<std::string>();
    detail::render(all, *body, r.format);
    if (r.gzip) {
        *body = detail::http::gzip(*body, gzip_level);
    }
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start);
    const std::lock_guard lock(mutex_);
    store_.observe(series(duration_), static_cast<std::uint64_t>(us.count()));
    return body;
}

metrics::series_ref node_metrics::series(metrics::family_id f) {
    return store_.series_of(f, std::span<const std::string_view>{});
}

void node_metrics::refresh_locked(bool force) {
    if (!started_) {
        return;
    }
    const auto now = clock::now();
    if (!force && refreshed_ && now - *refreshed_ < min_refresh_interval) {
        return;
    }
    collector_.scan();
    agents_served_ = collector_.refresh(now);
    refreshed_ = now;
}

}  // namespace xtel::exporter_program
