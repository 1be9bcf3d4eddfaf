#include "pushers.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "span_export.hpp"
#include "xtel/core/error.hpp"
#include "xtel/push/otlp.hpp"
#include "xtel/push/remote_write.hpp"

namespace xtel::xtel_exporter {

namespace {

using clock_type = pushers::clock_type;

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

/// This host's name, as the instance label and OTLP's host.name give it.
std::string host_name() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

push_counts counts(const push::http_pusher& p) {
    // The queue first: a request is counted sent before it leaves the queue, so sent read
    // after it covers every request the queue no longer shows.
    const std::uint64_t queued = p.queued();
    return {p.sent(), p.failed_attempts(), p.dropped(), p.rejected(), queued, 0};
}

}  // namespace

struct pushers::state {
    state(const options& o,
          node::scanner& files,
          std::optional<push::otlp_options> otlp,
          std::optional<push::otlp_trace_options> traces)
        : remote_write_schedule(o.remote_write_interval),
          otlp_schedule(otlp ? otlp->interval : std::chrono::seconds(1)) {
        if (!o.remote_write_url.empty()) {
            remote_write = std::make_unique<push::remote_writer>(o.remote_write_url);
        }
        if (otlp) {
            otlp_pusher = std::make_unique<push::otlp_pusher>(std::move(*otlp));
        }
        if (traces) {
            spans =
                std::make_unique<span_export>(span_export::settings{}, files, std::move(*traces));
        }
    }

    std::unique_ptr<push::remote_writer> remote_write;
    std::unique_ptr<push::otlp_pusher> otlp_pusher;
    std::unique_ptr<span_export> spans;
    std::vector<metrics::label> labels;
    schedule remote_write_schedule;
    schedule otlp_schedule;
};

std::optional<push::otlp_options> pushers::otlp_settings(const options& o) {
    try {
        return push::otlp_options_from(process_env, o.otlp, host_name());
    } catch (const config_error& e) {
        throw usage_error(e.what());
    }
}

std::optional<push::otlp_trace_options> pushers::trace_settings(const options& /*o*/) {
    try {
        return push::otlp_trace_options_from(process_env, host_name());
    } catch (const config_error& e) {
        throw usage_error(e.what());
    }
}

pushers::pushers(const options& o,
                 node::scanner& files,
                 std::optional<push::otlp_options> otlp,
                 std::optional<push::otlp_trace_options> traces)
    : state_(std::make_unique<state>(o, files, std::move(otlp), std::move(traces))) {}

pushers::~pushers() = default;

std::vector<push_health> pushers::health() const {
    std::vector<push_health> out;
    if (const push::http_pusher* w = state_->remote_write.get()) {
        out.push_back({"remote_write", "Remote-write", [w] { return counts(*w); }, false});
    }
    if (const push::otlp_pusher* e = state_->otlp_pusher.get()) {
        out.push_back({"otlp", "OTLP",
                       [e] {
                           push_counts c = counts(e->sender());
                           c.rejected_points = e->rejected_points();
                           return c;
                       },
                       true});
    }
    if (const span_export* t = state_->spans.get()) {
        out.push_back(
            {"otlp_traces", "OTLP traces", [t] { return counts(t->pusher().sender()); }, false});
    }
    return out;
}

std::function<metrics::snapshot()> pushers::span_health() const {
    if (const span_export* t = state_->spans.get()) {
        return [t] { return t->health(); };
    }
    return {};
}

void pushers::label(const options& o, const host_port& bound) {
    auto& labels = state_->labels;
    labels.clear();
    bool instance = false;
    for (const auto& [name, value] : o.remote_write_labels) {
        instance = instance || name == "instance";
        if (!value.empty()) {
            labels.push_back(metrics::label{name, value});
        }
    }
    if (!instance) {
        labels.push_back(metrics::label{"instance", fmt::format("{}:{}", host_name(), bound.port)});
    }
}

std::optional<pushers::clock_type::time_point> pushers::due() const noexcept {
    std::optional<clock_type::time_point> out;
    if (state_->remote_write) {
        out = state_->remote_write_schedule.due();
    }
    if (state_->otlp_pusher) {
        const auto otlp = state_->otlp_schedule.due();
        out = out ? std::min(*out, otlp) : otlp;
    }
    if (state_->spans) {
        const auto spans = state_->spans->due();
        out = out ? std::min(*out, spans) : spans;
    }
    return out;
}

void pushers::push_if_due(node_metrics& source, clock_type::time_point now) {
    state& s = *state_;
    if (s.spans) {
        s.spans->poll_if_due(now);
    }
    const bool remote_write = s.remote_write && s.remote_write_schedule.take(now);
    const bool otlp = s.otlp_pusher && s.otlp_schedule.take(now);
    if (!remote_write && !otlp) {
        return;
    }
    const auto all = source.snapshots(true);
    const std::uint64_t ns = epoch_ns();
    if (remote_write) {
        s.remote_write->push(
            push::encode_write_request(all, static_cast<std::int64_t>(ns / 1'000'000), s.labels));
    }
    if (otlp) {
        s.otlp_pusher->push(all, ns);
    }
}

}  // namespace xtel::xtel_exporter
