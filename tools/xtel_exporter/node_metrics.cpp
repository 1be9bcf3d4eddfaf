#include "node_metrics.hpp"

#include <fmt/format.h>

#include <span>
#include <string_view>
#include <utility>

#include "xtel/metrics/process_metrics.hpp"
#include "xtel/nixl/buffer_rings.hpp"
#include "xtel/nixl/multiproc_stores.hpp"

namespace xtel::xtel_exporter {

namespace {

/// Scrapes closer together than this share one reading of the files.
constexpr auto min_refresh_interval = std::chrono::milliseconds(200);
/// A shared body is rendered again after this long even if no agent's snapshot changed, for
/// the process's metrics and the exporter's own.
constexpr auto rerender_interval = std::chrono::seconds(1);

constexpr auto gauge = metrics::metric_type::gauge;
constexpr auto counter = metrics::metric_type::counter;

metrics::family_spec spec(std::string name, std::string help, metrics::metric_type type) {
    metrics::family_spec s;
    s.name = std::move(name);
    s.help = std::move(help);
    s.type = type;
    return s;
}

/// `s` with one label whose values the code fixes (so it never folds).
metrics::family_spec labelled(metrics::family_spec s, std::string label) {
    s.label_names.push_back(std::move(label));
    s.fixed_labels = true;
    return s;
}

/// Kept in microseconds, shown in seconds.
metrics::family_spec seconds_summary(std::string name, std::string help) {
    auto s = spec(std::move(name), std::move(help), metrics::metric_type::summary);
    s.decimals = 6;
    s.unit = "seconds";
    return s;
}

/// The /metrics endpoint's closed connections, as the exporter's health.
metrics::snapshot endpoint_snapshot(const http::server_stats& stats, std::uint64_t start_time_us) {
    metrics::family_snapshot closed;
    closed.spec = spec("xtel_exporter_http_connections_closed_total",
                       "Connections to /metrics the exporter closed to stay within its limits: "
                       "crowd (to admit newer ones past its 64), held_bytes (stalled with a body "
                       "no newer answer shares, past its bytes for those)",
                       counter);
    closed.spec.label_names = {"reason"};
    closed.spec.fixed_labels = true;
    for (const auto& [reason, value] :
         {std::pair<const char*, std::uint64_t>{"crowd", stats.closed_crowded},
          std::pair<const char*, std::uint64_t>{"held_bytes", stats.closed_held_bytes}}) {
        metrics::series s;
        s.label_values = {reason};
        s.value = value;
        closed.series.push_back(std::move(s));
    }
    metrics::snapshot out;
    out.families.push_back(std::move(closed));
    out.start_time_us = start_time_us;
    return out;
}

constexpr std::string_view agent_state_family = "xtel_exporter_agent_state";
constexpr std::string_view agent_unpublished_family = "xtel_exporter_agent_unpublished";

/// xtel_exporter_agent_state for one served agent: its labels (agent_name, rank, local_rank,
/// pid), one series per state, 1 for the one it is in (kube-state-metrics' manner, so that an
/// alert is `== 1` on the state it names).
std::shared_ptr<const metrics::snapshot> state_snapshot(const node::collector::agent& a,
                                                        std::uint64_t start_time_us) {
    using state = node::collector::writer_state;
    metrics::family_snapshot f;
    f.spec = labelled(spec(std::string(agent_state_family),
                           "Each agent served, by the state of its node file's writer: live, "
                           "closed (the agent stopped) or dead (it ended without closing); 1 for "
                           "the state it is in",
                           gauge),
                      "state");
    for (const auto& [name, st] :
         {std::pair{"live", state::live}, std::pair{"closed", state::closed},
          std::pair{"dead", state::dead}}) {
        metrics::series s;
        s.label_values = {name};
        s.value = a.state == st ? 1 : 0;
        f.series.push_back(std::move(s));
    }
    auto out = std::make_shared<metrics::snapshot>();
    out->labels = a.snapshot->labels;
    out->families.push_back(std::move(f));
    out->start_time_us = start_time_us;
    return out;
}

/// xtel_exporter_agent_unpublished for one live notice: agent_name, pid and reason.
std::shared_ptr<const metrics::snapshot> unpublished_snapshot(const node::notice& n,
                                                              std::uint64_t start_time_us) {
    metrics::family_snapshot f;
    f.spec = labelled(spec(std::string(agent_unpublished_family),
                           "Live agents that could not publish their node file, by reason (their "
                           "unpublished notice); 1 per agent",
                           gauge),
                      "reason");
    metrics::series s;
    s.label_values = {n.reason};
    s.value = 1;
    f.series.push_back(std::move(s));
    auto out = std::make_shared<metrics::snapshot>();
    out->labels = {{"agent_name", n.agent_name}, {"pid", std::to_string(n.pid)}};
    out->families.push_back(std::move(f));
    out->start_time_us = start_time_us;
    return out;
}

}  // namespace

node_metrics::node_metrics(node::collector::settings collector,
                           node::scanner& files,
                           std::vector<push_health> pushers,
                           std::function<metrics::snapshot()> extra,
                           bool old_names)
    : files_(files),
      collector_(std::move(collector), files),
      agents_(store_.add_family(
          spec("xtel_exporter_agents", "Agents whose metrics are served now", gauge))),
      unpublished_(store_.add_family(
          spec("xtel_exporter_agents_unpublished",
               "Live agents that could not publish their node file (their unpublished notices)",
               gauge))),
      seen_(store_.add_family(spec("xtel_exporter_agents_seen_total",
                                   "Agents (node files and their writers) seen so far",
                                   counter))),
      refused_(store_.add_family(labelled(
          labelled(spec("xtel_exporter_files_refused_total",
                        "Files of the agents' directory not served, by kind (node_file, notice, "
                        "span_ring, nixl_ring, nixl_store) and reason: foreign, not a regular "
                        "file, too large, not of "
                        "its format, damaged, undecodable, an unverified writer, past the series "
                        "cap; once per change of the file",
                        counter),
                   "kind"),
          "reason"))),
      families_left_out_(store_.add_family(labelled(
          spec("xtel_exporter_families_left_out_total",
               "Families left out of an agent's series, by reason: a node file whose name sorts "
               "first gives the family another type, or xtel-exporter serves a family of that "
               "name itself; once per file and family",
               counter),
          "reason"))),
      duration_(
          store_.add_family(seconds_summary("xtel_exporter_scrape_duration_seconds",
                                            "Time to read the node files and render /metrics"))),
      start_time_us_(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count())) {
    if (old_names) {
        old_read_errors_ = store_.add_family(labelled(
            spec("xtel_exporter_snapshot_read_errors_total",
                 "Renamed xtel_exporter_files_refused_total{kind=~\"node_file|notice\"} (served "
                 "under this name while NIXL_TELEMETRY_COMPAT_NAMES is set)",
                 counter),
            "reason"));
        if (files.config().span_rings) {
            old_span_refused_ = store_.add_family(labelled(
                spec("xtel_exporter_span_files_refused_total",
                     "Renamed xtel_exporter_files_refused_total{kind=\"span_ring\"} (served "
                     "under this name while NIXL_TELEMETRY_COMPAT_NAMES is set)",
                     counter),
                "reason"));
        }
    }
    for (push_health& h : pushers) {
        pushers_.push_back(add_push_families(std::move(h)));
    }
    make_series_at_zero();
    extra_ = std::move(extra);
    collector_.reserve_families(own_family_names());
}

node_metrics::push_families node_metrics::add_push_families(push_health h) {
    const auto family = [&](std::string_view what, std::string help, metrics::metric_type type) {
        return store_.add_family(
            spec(fmt::format("xtel_exporter_{}_{}", h.prefix, what), h.what + " " + help, type));
    };
    push_families f{
        .health = {},
        .sent = family("requests_sent_total", "requests the receiver took (2xx)", counter),
        .failed_attempts =
            family("failed_attempts_total", "attempts that failed and are retried", counter),
        .dropped = family("requests_dropped_total",
                          "requests dropped unsent because the queue was full", counter),
        .rejected =
            family("requests_rejected_total", "requests the receiver refused for good", counter),
        .queued = family("requests_queued",
                         "requests waiting to be sent, the one in flight included", gauge),
        .rejected_points = std::nullopt};
    if (h.counts_points) {
        f.rejected_points =
            family("rejected_points_total",
                   "data points the receiver said it rejected (partial success)", counter);
    }
    f.health = std::move(h);
    return f;
}

void node_metrics::make_series_at_zero() {
    // An alert on a reason needs its series before the first refusal.
    for (const auto f : {agents_, unpublished_, seen_, duration_}) {
        series(f);
    }
    for (std::size_t r = 0; r < node::collector::left_out_count; ++r) {
        left_out_series(static_cast<node::collector::left_out>(r));
    }
    set_refusals();
    for (const push_families& p : pushers_) {
        for (const auto f : {p.sent, p.failed_attempts, p.dropped, p.rejected, p.queued}) {
            series(f);
        }
        if (p.rejected_points) {
            series(*p.rejected_points);
        }
    }
}

std::vector<std::string> node_metrics::own_family_names() {
    std::vector<std::string> own;
    for (const auto& f : take_snapshot(store_).families) {
        own.push_back(f.spec.name);
    }
    for (const auto& f : metrics::process_snapshot().families) {
        own.push_back(f.spec.name);
    }
    for (const auto& f : endpoint_snapshot({}, 0).families) {
        own.push_back(f.spec.name);
    }
    if (extra_) {
        for (const auto& f : extra_().families) {
            own.push_back(f.spec.name);
        }
    }
    own.emplace_back(agent_state_family);
    own.emplace_back(agent_unpublished_family);
    return own;
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
    // The extra families first, the pushers' counts after: spans are counted as queued after
    // their request is, so a page that shows them queued also shows that request, queued,
    // in flight or sent (read the other way round, a page could count spans whose request it
    // did not show yet, and requests_queued 0 said nothing of them).
    std::optional<metrics::snapshot> extra;
    if (extra_) {
        extra = extra_();
    }
    {
        const std::lock_guard lock(mutex_);
        refresh_locked(force_refresh);
        out = agents_served_;
        store_.set(series(agents_), collector_.served());
        store_.set(series(unpublished_), collector_.unpublished().size());
        store_.set(series(seen_), collector_.seen_total());
        set_refusals();
        for (std::size_t r = 0; r < node::collector::left_out_count; ++r) {
            const auto reason = static_cast<node::collector::left_out>(r);
            store_.set(left_out_series(reason), collector_.families_left_out(reason));
        }
        for (const push_families& p : pushers_) {
            const push_counts c = p.health.probe();
            store_.set(series(p.sent), c.sent);
            store_.set(series(p.failed_attempts), c.failed_attempts);
            store_.set(series(p.dropped), c.dropped);
            store_.set(series(p.rejected), c.rejected);
            store_.set(series(p.queued), c.queued);
            if (p.rejected_points) {
                store_.set(series(*p.rejected_points), c.rejected_points);
            }
        }
        auto own = take_snapshot(store_);
        own.start_time_us = start_time_us_;
        out.push_back(std::make_shared<const metrics::snapshot>(std::move(own)));
    }
    if (extra) {
        out.push_back(std::make_shared<const metrics::snapshot>(std::move(*extra)));
    }
    auto process = metrics::process_snapshot();
    process.start_time_us = start_time_us_;
    out.push_back(std::make_shared<const metrics::snapshot>(std::move(process)));
    return out;
}

http::entity node_metrics::answer(http::representation r) {
    const auto start = clock::now();
    http::entity answer;
    {
        const std::lock_guard lock(cache_mutex_);
        auto agents = served_agents();
        if (agents != cached_agents_ || !cached_at_ || start - *cached_at_ >= rerender_interval) {
            auto shown = snapshots();
            shown.push_back(std::make_shared<const metrics::snapshot>(endpoint_snapshot(
                endpoint_probe_ ? endpoint_probe_() : http::server_stats{}, start_time_us_)));
            body_.show(std::move(shown));
            cached_agents_ = std::move(agents);
            cached_at_ = start;
        }
        answer = body_.answer(r);
    }
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start);
    const std::lock_guard lock(mutex_);
    store_.observe(series(duration_), static_cast<std::uint64_t>(us.count()));
    return answer;
}

void node_metrics::count_endpoint(std::function<http::server_stats()> probe) {
    const std::lock_guard lock(cache_mutex_);
    endpoint_probe_ = std::move(probe);
}

void node_metrics::serve_nixl(nixl::buffer_rings* rings, nixl::multiproc_stores* stores) {
    const std::lock_guard lock(mutex_);
    nixl_rings_ = rings;
    nixl_stores_ = stores;
    set_refusals();  // their reasons at 0 from the first scrape
}

std::optional<node_metrics::clock::time_point> node_metrics::drain_nixl_rings(
    clock::time_point now) {
    const std::lock_guard lock(mutex_);
    if (nixl_rings_ == nullptr) {
        return std::nullopt;
    }
    if (started_ && (!nixl_drained_ || now - *nixl_drained_ >= nixl_drain_interval)) {
        (void)nixl_rings_->refresh();  // the next refresh serves what this took
        nixl_drained_ = now;
    }
    return nixl_drained_.value_or(now) + nixl_drain_interval;
}

metrics::series_ref node_metrics::series(metrics::family_id f) {
    return store_.series_of(f, std::span<const std::string_view>{});
}

void node_metrics::set_refusals() {
    using node::file_kind;
    std::vector<file_kind> kinds = {file_kind::node_file, file_kind::notice};
    if (files_.config().span_rings) {
        kinds.push_back(file_kind::span_ring);
    }
    for (const file_kind k : kinds) {
        for (const node::refusal r : node::reasons_of(k)) {
            store_.set(refused_, {node::to_string(k), node::to_string(r)}, files_.refused(k, r));
        }
    }
    // NIXL's files, each kind from its own directory's scanner.
    for (const auto& [k, scanner] :
         {std::pair{file_kind::nixl_ring, nixl_rings_ ? &nixl_rings_->files() : nullptr},
          std::pair{file_kind::nixl_store, nixl_stores_ ? &nixl_stores_->files() : nullptr}}) {
        for (const node::refusal r :
             scanner ? node::reasons_of(k) : std::span<const node::refusal>{}) {
            store_.set(refused_, {node::to_string(k), node::to_string(r)}, scanner->refused(k, r));
        }
    }
    if (old_read_errors_) {
        // The old family's reasons in its order: a node file's, then a notice's own.
        for (const node::refusal r : node::node_file_reasons) {
            store_.set(*old_read_errors_, {node::to_string(r)}, collector_.read_errors(r));
        }
        const auto notice = node::refusal::bad_notice;
        store_.set(*old_read_errors_, {node::to_string(notice)}, collector_.read_errors(notice));
    }
    if (old_span_refused_) {
        for (const node::refusal r : node::span_ring_reasons) {
            store_.set(*old_span_refused_, {node::to_string(r)},
                       files_.refused(file_kind::span_ring, r));
        }
    }
}

metrics::series_ref node_metrics::left_out_series(node::collector::left_out r) {
    return store_.series_of(families_left_out_, {node::collector::name_of(r)});
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
    const auto agents = collector_.refresh_agents(now);
    // The agents' snapshots, then their states and the notices: made again only when one of
    // them changed, so that answer() shares its body while nothing did.
    std::vector<std::pair<std::shared_ptr<const metrics::snapshot>, node::collector::writer_state>>
        states;
    states.reserve(agents.size());
    for (const auto& a : agents) {
        states.emplace_back(a.snapshot, a.state);
    }
    if (states != states_ || collector_.unpublished() != notices_) {
        states_ = std::move(states);
        notices_ = collector_.unpublished();
        extras_.clear();
        for (const auto& a : agents) {
            extras_.push_back(state_snapshot(a, start_time_us_));
        }
        for (const auto& n : notices_) {
            extras_.push_back(unpublished_snapshot(n, start_time_us_));
        }
    }
    agents_served_.clear();
    agents_served_.reserve(agents.size() + extras_.size());
    for (const auto& a : agents) {
        agents_served_.push_back(a.snapshot);
    }
    if (nixl_rings_ != nullptr) {
        const auto rings = nixl_rings_->refresh();
        agents_served_.insert(agents_served_.end(), rings.begin(), rings.end());
        nixl_drained_ = now;
    }
    if (nixl_stores_ != nullptr) {
        const auto stores = nixl_stores_->refresh();
        agents_served_.insert(agents_served_.end(), stores.begin(), stores.end());
    }
    agents_served_.insert(agents_served_.end(), extras_.begin(), extras_.end());
    refreshed_ = now;
}

std::vector<std::shared_ptr<const metrics::snapshot>> node_metrics::served_agents() {
    const std::lock_guard lock(mutex_);
    refresh_locked(false);
    return agents_served_;
}

}  // namespace xtel::xtel_exporter
