#include "xtel/node/collector.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include <fmt/ranges.h>

#include "core/log.hpp"
#include "node/flock_holders.hpp"
#include "node/series_count.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node {

namespace {

/// A name gone from the directory is remembered this long with the reason it was refused for,
/// and at most this many are: enough for a file recreated under its name, bounded however many
/// names come and go.
constexpr auto forget_gone_after = std::chrono::minutes(10);
constexpr std::size_t max_gone = 4096;
/// Memory is given back to the system once snapshots of this many payload bytes were dropped.
constexpr std::uint64_t release_after_bytes = 1 << 20;

/// A payload whose agent_name label is not the agent its file's header names.
class name_mismatch : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// Adds the writer's `pid` to the labels every series of `s` carries. No family has a label of
/// that name: decode_snapshot refuses one (agents leave it out of a node file's xtel_agent_info).
void add_pid_label(metrics::snapshot& s, std::uint32_t pid) {
    s.labels.push_back({"pid", std::to_string(pid)});
}

refusal refusal_of(node::file::fault f) {
    switch (f) {
        case node::file::fault::unreadable:
            return refusal::unreadable;
        case node::file::fault::not_regular:
            return refusal::not_regular;
        case node::file::fault::too_large:
            return refusal::too_large;
        case node::file::fault::wrong_format:
            return refusal::not_node_file;
        case node::file::fault::damaged:
            break;
    }
    return refusal::damaged;
}

}  // namespace

void collector::reserve_families(std::vector<std::string> names) {
    auto& reserved = settings_.reserved_families;
    reserved.insert(reserved.end(), std::make_move_iterator(names.begin()),
                    std::make_move_iterator(names.end()));
}

std::string_view collector::name_of(left_out r) noexcept {
    switch (r) {
        case left_out::type_conflict:
            return "type_conflict";
        case left_out::reserved_name:
            return "reserved_name";
        case left_out::name_clash:
            return "name_clash";
    }
    return "type_conflict";
}

scanner::settings collector::scanner_settings(const settings& s, bool span_rings) {
    return {.dir = s.dir,
            .program = s.program,
            .allowed_uids = s.allowed_uids,
            .max_file_bytes = s.max_file_bytes,
            .span_rings = span_rings};
}

collector::collector(settings s)
    : settings_(std::move(s)),
      own_files_(std::make_unique<scanner>(scanner_settings(settings_))),
      files_(*own_files_) {}

collector::collector(settings s, scanner& files) : settings_(std::move(s)), files_(files) {
    const scanner::settings& f = files.config();
    if (f.dir != settings_.dir || f.allowed_uids != settings_.allowed_uids ||
        f.max_file_bytes != settings_.max_file_bytes) {
        throw std::invalid_argument(fmt::format(
            "collector of {} (allowed uids [{}], {} bytes a node file): the scanner given lists "
            "{} (allowed uids [{}], {} bytes a node file); the two must agree",
            settings_.dir.string(), fmt::join(settings_.allowed_uids, ", "),
            settings_.max_file_bytes, f.dir.string(), fmt::join(f.allowed_uids, ", "),
            f.max_file_bytes));
    }
}

collector::~collector() = default;

std::uint64_t collector::read_errors(refusal r) const noexcept {
    return files_.refused(file_kind::node_file, r) + files_.refused(file_kind::notice, r);
}

std::uint64_t collector::read_errors_total() const noexcept {
    std::uint64_t total = 0;
    for (const file_kind k : {file_kind::node_file, file_kind::notice}) {
        for (const refusal r : reasons_of(k)) {
            total += files_.refused(k, r);
        }
    }
    return total;
}

void collector::scan() noexcept {
    try {
        // Null: the directory cannot be read (logged by the scanner); the files stay as they were.
        const auto listed = files_.scan();
        if (!listed) {
            release_memory();
            return;
        }
        const auto& notices = listed->of(file_kind::notice);
        const auto& present = listed->of(file_kind::node_file);
        // Notices: looked at again only when they change (they are written once).
        std::erase_if(notices_, [&](const auto& n) { return !notices.contains(n.first); });
        for (const auto& [name, id] : notices) {
            auto [it, added] = notices_.try_emplace(name);
            if (added || it->second.id != id) {
                it->second = notice_source{};
                it->second.id = id;
                open_notice(*listed, name, it->second);
            }
        }

        // A file deleted from the directory is dropped at once.
        for (auto it = sources_.begin(); it != sources_.end();) {
            if (present.contains(it->first)) {
                ++it;
                continue;
            }
            remember_gone(it->first, it->second);
            drop_snapshot(it->second);
            it = sources_.erase(it);
        }
        for (const auto& [name, id] : present) {
            auto [it, added] = sources_.try_emplace(name);
            source& s = it->second;
            if (added) {
                if (const auto g = gone_.find(name); g != gone_.end()) {
                    s.reported = g->second.first;
                    gone_.erase(g);
                }
            }
            const bool changed = s.id != id;
            s.id = id;
            // A file served is opened again once replaced; a file refused, once it changes.
            const bool reopen =
                s.reader && !s.refused ? s.reader->replaced() : !s.refused || changed;
            if (reopen) {
                const auto reported = s.reported;
                drop_snapshot(s);
                s = source{};
                s.id = id;
                s.reported = reported;
                open(*listed, name, s);
            }
        }
        const auto now = clock::now();
        std::erase_if(gone_,
                      [&](const auto& g) { return now - g.second.second > forget_gone_after; });
    } catch (const std::exception& e) {
        xtel::detail::log(log_level::error, "{}: scanning {} failed: {}", settings_.program,
                          settings_.dir.string(), e.what());
    }
    release_memory();
}

void collector::open(const listing& l, const std::string& name, source& s) {
    opened o = files_.open(l, file_kind::node_file, name);
    if (o.refused && o.retry) {
        report(name, s, *o.refused, o.why + " (tried again at the next listing)");
        return;
    }
    if (o.refused) {
        refuse(name, s, *o.refused, o.why);
        return;
    }
    if (o.fd() < 0) {
        return;  // gone since it was listed: an agent going away, nothing to report
    }
    try {
        s.reader = std::make_unique<node::file::reader>(o.release(), settings_.dir / name,
                                                        settings_.max_file_bytes);
    } catch (const node::file::format_error& e) {
        refuse(name, s, refusal_of(e.kind()), e.what());
        return;
    }
    // A writer names its file after its agent: a file under another agent's name (a copy, or
    // one renamed there) would serve that agent's series twice, or in its place.
    if (name != s.reader->agent_name() + std::string(node::file::file_suffix)) {
        const std::string header_name = s.reader->agent_name();
        s.reader.reset();
        refuse(name, s, refusal::name_mismatch,
               fmt::format("its header names agent '{}', whose file would be '{}{}'",
                           parse::escape_controls(header_name), parse::escape_controls(header_name),
                           node::file::file_suffix));
    }
}

void collector::report(const std::string& name,
                       source& s,
                       std::optional<refusal> r,
                       std::string_view why) {
    if (s.reported == r) {
        return;
    }
    const auto path = (settings_.dir / name).string();
    s.reported = r;
    if (!r) {
        xtel::detail::log(log_level::info, "{}: {} is served again", settings_.program, path);
        return;
    }
    files_.count(file_kind::node_file, *r);
    xtel::detail::log(log_level::warning, "{}: {} is not served{}: {}: {}", settings_.program, path,
                      s.refused ? " (until it changes)" : "", to_string(*r), why);
}

void collector::refuse(const std::string& name, source& s, refusal r, std::string_view why) {
    drop_snapshot(s);
    s.refused = true;
    report(name, s, r, why);
}

void collector::drop_snapshot(source& s) noexcept {
    if (s.latest) {
        dropped_bytes_ += s.payload_bytes;
    }
    s.latest.reset();
    s.served.reset();
    s.left_out.clear();
    s.number = 0;
    s.series = 0;
    s.payload_bytes = 0;
}

void collector::remember_gone(const std::string& name, const source& s) {
    if (!s.reported) {
        return;
    }
    if (gone_.size() >= max_gone) {
        const auto oldest = std::min_element(
            gone_.begin(), gone_.end(),
            [](const auto& a, const auto& b) { return a.second.second < b.second.second; });
        gone_.erase(oldest);
    }
    gone_[name] = {*s.reported, clock::now()};
}

bool collector::read(source& s, std::uint64_t budget) {
    const std::uint64_t current = s.reader->published();
    if (current == s.number) {
        return true;  // nothing new (or nothing yet, both 0)
    }
    if (current == s.over_cap_number && s.over_cap_series > budget) {
        return false;  // the payload already counted, still over the cap
    }
    const auto p = s.reader->read_latest();
    // nullopt: the writer published during every try; the previous payload is served.
    if (!p || p->number == 0 || p->number == s.number) {
        return true;
    }
    const auto series = detail::count_time_series(p->payload, budget);
    if (series && *series > budget) {
        drop_snapshot(s);
        s.over_cap_number = p->number;
        s.over_cap_series = *series;
        if (p->payload.size() >= release_after_bytes) {
            dropped_bytes_ += p->payload.size();
        }
        return false;
    }
    // A payload the count could not walk is decoded all the same, for decode_snapshot's
    // message naming what is wrong (it allocates in proportion to the bytes only).
    auto snap = metrics::decode_snapshot(p->payload);
    for (const auto& l : snap.labels) {
        if (l.name == "agent_name" && l.value != s.reader->agent_name()) {
            throw name_mismatch(fmt::format(
                "its payload's agent_name '{}' is not the agent '{}' its header names",
                parse::escape_controls(l.value), parse::escape_controls(s.reader->agent_name())));
        }
    }
    add_pid_label(snap, s.reader->writer_pid());
    snap.start_time_us = s.reader->created_us();
    if (!s.seen) {
        s.seen = true;
        ++seen_total_;
    }
    s.latest = std::make_shared<const metrics::snapshot>(std::move(snap));
    s.served.reset();
    s.number = p->number;
    s.published_us = p->published_us;
    s.series = series.value_or(0);
    s.payload_bytes = p->payload.size();
    return true;
}

std::vector<std::shared_ptr<const metrics::snapshot>> collector::refresh(clock::time_point now) {
    std::vector<std::shared_ptr<const metrics::snapshot>> out;
    for (auto& a : refresh_agents(now)) {
        out.push_back(std::move(a.snapshot));
    }
    return out;
}

std::vector<collector::agent> collector::refresh_agents(clock::time_point now) {
    holders_.clear();  // read again, once, by the first live file that needs it
    check_notices();
    std::vector<std::pair<const std::string*, source*>> chosen;
    chosen.reserve(sources_.size());
    std::uint64_t budget = settings_.max_series;
    for (auto& [name, s] : sources_) {
        if (!s.reader || s.refused) {
            continue;
        }
        if (s.ended && now - *s.ended >= settings_.stale_ttl) {
            drop_snapshot(s);  // stale: its series are gone until the file is replaced
            continue;
        }
        try {
            const verdict v = check_writer(name, s, now);
            if (v == verdict::refuse) {
                drop_snapshot(s);
                continue;
            }
            if (!s.ended) {
                s.seen_live = v == verdict::serve || s.seen_live;
            } else if (now - *s.ended >= settings_.stale_ttl) {
                drop_snapshot(s);  // stopped long enough before this collector first saw it
                continue;
            }
            if (v == verdict::serve && !read(s, budget)) {
                report(name, s, refusal::series_limit,
                       fmt::format("its {} time series would take the node past --max-series "
                                   "{} ({} left after the files before it by name)",
                                   s.over_cap_series, settings_.max_series, budget));
                continue;
            }
            if (s.latest && s.series > budget) {
                // Fitted when it was read; files before it have grown since.
                s.over_cap_number = s.number;
                s.over_cap_series = s.series;
                drop_snapshot(s);
                report(name, s, refusal::series_limit,
                       fmt::format("its {} time series would take the node past --max-series "
                                   "{} ({} left after the files before it by name)",
                                   s.over_cap_series, settings_.max_series, budget));
                continue;
            }
        } catch (const node::file::format_error& e) {
            // Kept open, so that it is tried again only once it changes.
            refuse(name, s, refusal_of(e.kind()), e.what());
            continue;
        } catch (const metrics::snapshot_decode_error& e) {
            refuse(name, s, refusal::bad_snapshot,
                   fmt::format("{}: {}", (settings_.dir / name).string(), e.what()));
            continue;
        } catch (const name_mismatch& e) {
            refuse(name, s, refusal::name_mismatch, e.what());
            continue;
        }
        if (s.latest) {
            budget -= s.series;
            report(name, s, std::nullopt);
            chosen.emplace_back(&name, &s);
        }
    }
    resolve_type_conflicts(chosen);
    std::vector<agent> out;
    out.reserve(chosen.size());
    for (const auto& [name, s] : chosen) {
        out.push_back({s->served ? s->served : s->latest, s->state, s->ended, s->published_us});
    }
    served_ = out.size();
    release_memory();
    return out;
}

void collector::release_memory() noexcept {
    if (dropped_bytes_ < release_after_bytes) {
        return;
    }
    dropped_bytes_ = 0;
#if defined(__GLIBC__)
    // glibc keeps freed memory for reuse, also after a large payload or snapshot (a faulty
    // writer's) is gone; given back at once, xtel-exporter's size follows what it serves.
    ::malloc_trim(0);
#endif
}

}  // namespace xtel::node
