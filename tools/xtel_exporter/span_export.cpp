#include "span_export.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"

namespace xtel::xtel_exporter {

namespace {

namespace ring = trace::span_ring;

node::refusal refusal_of(file_fault f) {
    switch (f) {
        case file_fault::unreadable:
            return node::refusal::unreadable;
        case file_fault::not_regular:
            return node::refusal::not_regular;
        case file_fault::too_large:
            return node::refusal::too_large;
        case file_fault::wrong_format:
            return node::refusal::not_span_file;
        case file_fault::damaged:
            return node::refusal::damaged;
    }
    return node::refusal::unreadable;
}

std::uint64_t epoch_us() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

metrics::family_snapshot counter(std::string name, std::string help, std::uint64_t value) {
    metrics::family_snapshot f;
    f.spec.name = std::move(name);
    f.spec.help = std::move(help);
    f.spec.type = metrics::metric_type::counter;
    metrics::series s;
    s.value = value;
    f.series.push_back(std::move(s));
    return f;
}

}  // namespace

/// One span file as last listed: its reader while it is read; none once it was refused or read
/// to the end its writer left (it stays so until the name names another file).
struct span_export::file {
    node::file_identity id;
    std::unique_ptr<ring::reader> reader;
    std::uint64_t lost_logged = 0;  ///< the reader's lost() when last logged
};

span_export::span_export(settings s, node::scanner& files, push::otlp_trace_options o)
    : settings_(std::move(s)), scanner_(files), pusher_(std::move(o)), start_time_us_(epoch_us()) {
    if (!files.config().span_rings) {
        throw std::invalid_argument(
            fmt::format("the span export of {} is given a scanner that does not list span rings "
                        "(scanner::settings::span_rings is false)",
                        files.config().dir.string()));
    }
}

span_export::~span_export() = default;

void span_export::refuse(const std::string& name, node::refusal r, std::string_view why) {
    scanner_.count(node::file_kind::span_ring, r);
    // The reader's messages start with the path this line names already.
    const std::string path = (scanner_.config().dir / name).string();
    if (why.starts_with(path + ": ")) {
        why.remove_prefix(path.size() + 2);
    }
    log(log_level::warning, fmt::format("span file {}: {} ({}; its spans are not "
                                        "exported until the file is replaced)",
                                        path, why, node::to_string(r)));
}

void span_export::sync(const node::listing& l) {
    const auto& listed = l.of(node::file_kind::span_ring);
    // Gone or replaced: forgotten once their readers have read what is left (poll_if_due).
    for (auto it = files_.begin(); it != files_.end();) {
        const auto found = listed.find(it->first);
        if (found == listed.end() || !found->second.same_file(it->second->id)) {
            if (it->second->reader) {
                leaving_.push_back(std::move(it->second));
            }
            it = files_.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [name, id] : listed) {
        if (files_.count(name) != 0) {
            continue;
        }
        node::opened o = scanner_.open(l, node::file_kind::span_ring, name);
        if (!o.refused && o.fd() < 0) {
            continue;  // gone since it was listed: nothing to read
        }
        auto f = std::make_unique<file>();
        f->id = id;
        if (o.refused) {
            refuse(name, *o.refused, o.why);
        } else {
            try {
                f->reader =
                    std::make_unique<ring::reader>(o.release(), scanner_.config().dir / name,
                                                   scanner_.max_bytes(node::file_kind::span_ring));
            } catch (const format_error& e) {
                refuse(name, refusal_of(e.kind()), e.what());
            }
        }
        files_.emplace(name, std::move(f));
    }
}

bool span_export::read(file& f, std::size_t budget, std::vector<push::otlp_agent_spans>& out) {
    ring::reader& r = *f.reader;
    // Asked before reading: a writer that closes after this read leaves its last spans to the
    // next one.
    const bool ended = r.closed() || !r.writer_alive();
    push::otlp_agent_spans a{r.agent_name(), r.writer_pid(), {}};
    ring::read_result got;
    try {
        got = r.read(a.spans, budget);
    } catch (const format_error& e) {
        refuse(r.path().filename().string(), node::refusal::damaged, e.what());
        return false;
    }
    read_.fetch_add(got.copied, std::memory_order_relaxed);
    if (got.lost != 0) {
        lost_.fetch_add(got.lost, std::memory_order_relaxed);
        if (f.lost_logged == 0) {
            log(log_level::warning,
                fmt::format("span file {}: {} spans were overwritten before they "
                            "could be read (the agent writes faster than they are exported; "
                            "counted in xtel_exporter_spans_lost_total, logged once per file)",
                            r.path().string(), got.lost));
        }
        f.lost_logged = r.lost();
    }
    if (!a.spans.empty()) {
        out.push_back(std::move(a));
    }
    if (ended && got.copied < budget) {
        log(log_level::info,
            fmt::format("span file {}: read to its end, its writer (pid {}) {}", r.path().string(),
                        r.writer_pid(), r.closed() ? "closed it" : "is gone"));
        return false;
    }
    return true;
}

void span_export::poll_if_due(clock_type::time_point now) {
    if (now < next_) {
        return;
    }
    next_ += settings_.interval;
    if (next_ <= now) {
        next_ = now + settings_.interval;
    }
    if (const auto l = scanner_.latest(); l && l->number() != synced_) {
        synced_ = l->number();
        sync(*l);
    }
    std::vector<push::otlp_agent_spans> agents;
    std::size_t left = settings_.max_spans_per_poll;
    // Reads `f` within what is left of the poll's spans; false once it is to be forgotten.
    const auto take = [&](file& f) {
        const std::size_t had = agents.size();
        const bool keep = read(f, std::min(left, settings_.max_spans_per_file), agents);
        if (agents.size() > had) {
            left -= std::min(left, agents.back().spans.size());
        }
        return keep;
    };
    // A file deleted or replaced: what its writer left is read once more from the descriptor.
    for (const auto& f : leaving_) {
        if (left != 0) {
            take(*f);
        }
    }
    leaving_.clear();
    std::uint64_t open = 0;
    for (auto& [name, f] : files_) {
        if (!f->reader) {
            continue;
        }
        if (left != 0 && !take(*f)) {
            f->reader.reset();
            continue;
        }
        ++open;
    }
    files_open_.store(open, std::memory_order_relaxed);
    std::uint64_t spans = 0;
    for (const auto& a : agents) {
        spans += a.spans.size();
    }
    if (spans != 0) {
        pusher_.push(agents);
        queued_.fetch_add(spans, std::memory_order_relaxed);
    }
}

metrics::snapshot span_export::health() const {
    metrics::snapshot out;
    out.start_time_us = start_time_us_;
    out.families.push_back(counter("xtel_exporter_spans_read_total",
                                   "Spans read from the agents' span files", read_.load()));
    out.families.push_back(counter(
        "xtel_exporter_spans_lost_total",
        "Spans overwritten in a span file before xtel-exporter could read them", lost_.load()));
    out.families.push_back(counter("xtel_exporter_spans_queued_total",
                                   "Spans handed to the OTLP traces sender (their requests' fate: "
                                   "xtel_exporter_otlp_traces_requests_*)",
                                   queued_.load()));
    out.families.push_back(counter("xtel_exporter_spans_rejected_total",
                                   "Spans the traces receiver said it rejected (partial success)",
                                   pusher_.rejected_spans()));
    metrics::family_snapshot files;
    files.spec.name = "xtel_exporter_span_files";
    files.spec.help = "Span files being read now";
    files.spec.type = metrics::metric_type::gauge;
    files.series.push_back({});
    files.series.back().value = files_open_.load();
    out.families.push_back(std::move(files));
    return out;
}

}  // namespace xtel::xtel_exporter
