#include "xtel/nixl/multiproc_stores.hpp"

#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <iterator>
#include <optional>
#include <utility>

#include "core/log.hpp"
#include "nixl/event_model.hpp"
#include "node/flock_holders.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/nixl/multiproc_store.hpp"

namespace xtel::nixl {

struct multiproc_stores::store_file {
    node::file_identity id;
    int fd = -1;
    /// Refused, or its writer ended: looked at again only when the file changes.
    bool done = false;
    /// The refusal logged and counted last: a file is reported once per reason.
    std::optional<node::refusal> reported;
    /// What is served of it; null while it is not.
    std::shared_ptr<const metrics::snapshot> served;
    /// xtel's set, fed the store's increments (made at its first read, when xtel's set is
    /// served), and the counters it was fed so far.
    std::unique_ptr<event_model> model;
    std::array<std::uint64_t, multiproc_store::slot_count> fed{};

    store_file() = default;
    store_file(const store_file&) = delete;
    store_file& operator=(const store_file&) = delete;
    ~store_file() { close(); }

    /// Nothing of it served any more, and nothing fed: read again from its start.
    void forget() noexcept {
        close();
        served.reset();
        model.reset();
        fed = {};
    }

    void close() noexcept {
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
    }
};

namespace {

using event_type = abi_v2::event_type;

/// Where each family of the NIXL set is in a store: a slot of which array. NIXL's
/// prometheus_mp serves exactly these (checked against its port by tests/nixl/store_test.py).
enum class field : std::uint8_t { counter, gauge, histogram, errors };
struct family_source {
    std::string_view family;
    field from;
    event_type slot;
};
constexpr family_source sources[] = {
    {"agent_tx_bytes_total", field::counter, event_type::tx_bytes},
    {"agent_rx_bytes_total", field::counter, event_type::rx_bytes},
    {"agent_tx_requests_num_total", field::counter, event_type::tx_requests_num},
    {"agent_rx_requests_num_total", field::counter, event_type::rx_requests_num},
    {"agent_memory_registered_total", field::counter, event_type::memory_registered},
    {"agent_memory_deregistered_total", field::counter, event_type::memory_deregistered},
    {"agent_xfer_time_total", field::counter, event_type::xfer_time},
    {"agent_xfer_post_time_total", field::counter, event_type::xfer_post_time},
    {"agent_telemetry_events_dropped_total", field::counter, event_type::telemetry_events_dropped},
    {"agent_tx_last_bytes", field::gauge, event_type::tx_bytes},
    {"agent_rx_last_bytes", field::gauge, event_type::rx_bytes},
    {"agent_memory_registered_last_bytes", field::gauge, event_type::memory_registered},
    {"agent_memory_deregistered_last_bytes", field::gauge, event_type::memory_deregistered},
    {"agent_xfer_time", field::gauge, event_type::xfer_time},
    {"agent_xfer_post_time", field::gauge, event_type::xfer_post_time},
    {"agent_xfer_time_us", field::histogram, event_type::xfer_time},
    {"agent_xfer_post_time_us", field::histogram, event_type::xfer_post_time},
    {"agent_errors_total", field::errors, static_cast<event_type>(abi_v2::first_error_type)},
};

node::scanner::settings scanner_settings(const multiproc_stores::settings& s) {
    return {.dir = s.dir,
            .program = s.program,
            .allowed_uids = s.allowed_uids,
            .max_file_bytes = 0,
            .span_rings = false,
            .nixl_rings = false,
            .max_nixl_ring_bytes = 0,
            .nixl_stores = true,
            .max_nixl_store_bytes = multiproc_store::file_size};
}

/// The NIXL set's families a model made with `s` serves at 0, of those a store has and
/// `globs` choose (none: all).
std::vector<metrics::family_snapshot> nixl_families(const multiproc_stores::settings& s) {
    if (!metrics::has(s.model.sets, metrics::family_sets::nixl)) {
        return {};
    }
    metrics::agent_metrics_settings only_nixl = s.model;
    only_nixl.sets = metrics::family_sets::nixl;
    only_nixl.builders.reset();
    only_nixl.rank = {};
    only_nixl.histograms = metrics::histogram_kind::classic;  // a store has classic buckets
    metrics::agent_metrics model("nixl-store", only_nixl);
    model.publish();
    std::vector<metrics::family_snapshot> out = model.latest()->families;
    std::erase_if(out, [&](const metrics::family_snapshot& f) {
        const bool stored =
            std::any_of(std::begin(sources), std::end(sources),
                        [&](const family_source& r) { return r.family == f.spec.name; });
        const bool chosen = s.families.empty() ||
                            std::any_of(s.families.begin(), s.families.end(), [&](const auto& g) {
                                return metrics::glob_matches(g, f.spec.name);
                            });
        return !stored || !chosen;
    });
    return out;
}

/// The settings of a store's model of xtel's set; nullopt when `s` serves the NIXL set alone.
std::optional<metrics::agent_metrics_settings> xtel_model(const multiproc_stores::settings& s) {
    if (!metrics::has(s.model.sets, metrics::family_sets::xtel)) {
        return std::nullopt;
    }
    metrics::agent_metrics_settings only_xtel = s.model;
    only_xtel.sets = metrics::family_sets::xtel;
    only_xtel.builders.reset();
    only_xtel.rank = {};  // the reader's, not the agent's
    return only_xtel;
}

/// xtel's families a store's model makes that a store cannot tell: it counts bytes, not the
/// registrations that registered them.
constexpr std::string_view untold[] = {"xtel_memory_registrations_total",
                                       "xtel_memory_deregistrations_total"};

/// NIXL's events that take a model fed `fed` (counters, by NIXL's event type) to the counters
/// of `s`, appended to `out`: each counter's increment, but for the two times' (a store's
/// histograms do not say which transfer took which time: xtel's latency histograms are not made
/// from a store), each direction's bytes beside its requests, so that they map as one transfer.
/// What is wrong (a counter that fell: NIXL's only grow), or empty.
std::string increments(const std::array<std::uint64_t, multiproc_store::slot_count>& fed,
                       const multiproc_store::store& s,
                       std::vector<abi_v2::event>& out) {
    std::vector<std::uint32_t> order = {0, 2, 1, 3, 4, 5};  // tx bytes, tx requests, rx...
    for (std::uint32_t t = abi_v2::first_error_type; t <= abi_v2::last_error_type; ++t) {
        order.push_back(t);
    }
    order.push_back(static_cast<std::uint32_t>(event_type::telemetry_events_dropped));
    for (const std::uint32_t t : order) {
        if (s.counters[t] < fed[t]) {
            return fmt::format(
                "its counter of NIXL event type {} fell from {} to {}; NIXL's only "
                "grow",
                t, fed[t], s.counters[t]);
        }
        if (s.counters[t] > fed[t]) {
            out.push_back({static_cast<event_type>(t), s.counters[t] - fed[t]});
        }
    }
    return {};
}

/// The slot of NIXL's error status `status` (agent_errors_total's label).
std::optional<std::size_t> error_slot(std::string_view status) {
    const auto& all = metrics::agent_metrics::nixl_error_statuses;
    const auto it = std::find(std::begin(all), std::end(all), status);
    if (it == std::end(all)) {
        return std::nullopt;
    }
    return abi_v2::first_error_type + static_cast<std::size_t>(it - std::begin(all));
}

/// `series` valued from slot `slot` of `s`'s field `from`; the host name NIXL wrote as its
/// hostname label (the first, the NIXL set's).
void value(metrics::series& series, const multiproc_store::store& s, field from, std::size_t slot) {
    if (!series.label_values.empty()) {
        series.label_values.front() = s.hostname;
    }
    switch (from) {
        case field::counter:
        case field::errors:
            series.value = s.counters[slot];
            return;
        case field::gauge:
            series.value = s.gauges[slot];
            return;
        case field::histogram: {
            const auto& b = s.buckets[slot];
            series.buckets.assign(b.begin(), b.end() - 1);  // the last is +Inf: in count only
            series.count = 0;
            for (const std::uint64_t n : b) {
                series.count += n;  // no overflow: multiproc_store::check refuses one
            }
            series.sum = s.sums[slot];
            series.exemplars.clear();
            return;
        }
    }
}

}  // namespace

multiproc_stores::multiproc_stores(settings s)
    : settings_(std::move(s)),
      files_(scanner_settings(settings_)),
      families_(nixl_families(settings_)),
      xtel_model_(xtel_model(settings_)) {}

multiproc_stores::~multiproc_stores() = default;

metrics::snapshot multiproc_stores::snapshot_of(
    const multiproc_store::store& s, const std::vector<metrics::family_snapshot>& model) {
    metrics::snapshot out;
    // NIXL's agent_instance too: two agents of one name in one process have a store each, and
    // without it their series would be one series twice.
    out.labels = {{"agent_name", s.agent_name},
                  {"pid", std::to_string(s.pid)},
                  {"agent_instance", std::to_string(s.agent_index)}};
    if (!s.local_rank.empty()) {
        out.labels.push_back({"local_rank", s.local_rank});
    }
    for (const metrics::family_snapshot& f : model) {
        const auto source =
            std::find_if(std::begin(sources), std::end(sources),
                         [&](const family_source& r) { return r.family == f.spec.name; });
        if (source == std::end(sources)) {
            continue;  // a family no store holds
        }
        metrics::family_snapshot served = f;
        if (source->from == field::histogram) {
            served.spec.bounds = s.bounds;  // the writer's NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US
        }
        for (metrics::series& series : served.series) {
            std::optional<std::size_t> slot = static_cast<std::size_t>(source->slot);
            if (source->from == field::errors) {
                slot = series.label_values.size() == 2 ? error_slot(series.label_values[1])
                                                       : std::nullopt;
            }
            if (slot) {
                value(series, s, source->from, *slot);
            }
        }
        out.families.push_back(std::move(served));
    }
    return out;
}

std::vector<std::shared_ptr<const metrics::snapshot>> multiproc_stores::refresh() noexcept {
    std::vector<std::shared_ptr<const metrics::snapshot>> out;
    try {
        if (const std::shared_ptr<const node::listing> l = files_.scan()) {
            const auto& listed = l->of(node::file_kind::nixl_store);
            std::erase_if(stores_, [&](const auto& f) { return !listed.contains(f.first); });
            holders_.reset();
            for (const auto& [name, id] : listed) {
                auto it = stores_.find(name);
                if (it != stores_.end() && !it->second.id.same_file(id)) {
                    stores_.erase(it);  // another file under the name
                    it = stores_.end();
                }
                if (it == stores_.end()) {
                    it = stores_.try_emplace(name).first;
                }
                store_file& f = it->second;
                if (f.done && f.id == id) {
                    continue;  // looked at again when it changes
                }
                f.id = id;
                if (f.fd < 0) {
                    open(*l, name, f);
                }
                if (f.fd >= 0) {
                    read(name, f);
                }
            }
        }
        for (const auto& [name, f] : stores_) {
            if (f.served != nullptr) {
                out.push_back(f.served);
            }
        }
    } catch (const std::exception& e) {
        xtel::detail::log(log_level::error, "{}: reading NIXL stores in {} failed: {}",
                          settings_.program, settings_.dir.string(), e.what());
    }
    return out;
}

void multiproc_stores::open(const node::listing& l, const std::string& name, store_file& f) {
    node::opened o = files_.open(l, node::file_kind::nixl_store, name);
    if (o.refused) {
        if (!o.retry) {
            refuse(name, f, *o.refused, o.why);
        }
        return;
    }
    if (o.fd() < 0) {
        return;  // gone since it was listed
    }
    f.fd = o.release();
    f.done = false;
}

void multiproc_stores::read(const std::string& name, store_file& f) {
    multiproc_store::checked c = multiproc_store::read(f.fd);
    switch (c.what) {
        case multiproc_store::verdict::not_ready:
            return;
        case multiproc_store::verdict::not_nixl:
            refuse(name, f, node::refusal::not_nixl_file, c.why);
            return;
        case multiproc_store::verdict::damaged:
            refuse(name, f, node::refusal::damaged, c.why);
            return;
        case multiproc_store::verdict::ok:
            break;
    }
    if (!writer_live(name, f, c.fields.pid)) {
        return;
    }
    metrics::snapshot shown = snapshot_of(c.fields, families_);
    if (xtel_model_) {
        std::vector<abi_v2::event> events;
        if (std::string fault = increments(f.fed, c.fields, events); !fault.empty()) {
            refuse(name, f, node::refusal::damaged, fault);
            return;
        }
        if (f.model == nullptr) {
            f.model = std::make_unique<event_model>(c.fields.agent_name, *xtel_model_);
        }
        f.model->apply(events);
        f.fed = c.fields.counters;
        for (const metrics::family_snapshot& fam : f.model->served(settings_.families)->families) {
            if (std::find(std::begin(untold), std::end(untold), fam.spec.name) ==
                std::end(untold)) {
                shown.families.push_back(fam);
            }
        }
        std::sort(shown.families.begin(), shown.families.end(),
                  [](const auto& a, const auto& b) { return a.spec.name < b.spec.name; });
    }
    f.reported.reset();
    auto s = std::make_shared<const metrics::snapshot>(std::move(shown));
    if (f.served == nullptr || *f.served != *s) {
        f.served = std::move(s);  // a new pointer only for new values: a body is shared till then
    }
}

bool multiproc_stores::writer_live(const std::string& name, store_file& f, std::int64_t pid) {
    if (!holders_) {
        holders_ = std::make_unique<node::detail::flock_holders>(
            node::detail::flock_holders::read(static_cast<dev_t>(f.id.dev)));
    }
    if (const auto holder = holders_->holder(static_cast<ino_t>(f.id.ino))) {
        const auto inner = node::detail::innermost_pid(*holder);
        if (!inner) {
            return false;  // the holder ended since /proc/locks was read: looked at again
        }
        if (*inner == pid) {
            return true;
        }
        refuse(name, f, node::refusal::writer_mismatch,
               *inner == *holder
                   ? fmt::format("its lock is held by pid {}, not by the writer (pid {}) its "
                                 "header names",
                                 *holder, pid)
                   : fmt::format("its lock is held by pid {} (pid {} in its own PID namespace), "
                                 "not by the writer (pid {}) its header names",
                                 *holder, *inner, pid));
        return false;
    }
    // No visible holder: none, or one in a PID namespace this process cannot see. A shared
    // probe tells: it fails against a writer's exclusive lock, and is dropped at once.
    if (::flock(f.fd, LOCK_SH | LOCK_NB) != 0) {
        refuse(name, f, node::refusal::writer_unverified,
               fmt::format("its lock is held by a process this program cannot see, so it cannot "
                           "tell whether that is the writer (pid {}) its header names; run it in "
                           "the agents' PID namespace with a /proc that shows their processes",
                           pid));
        return false;
    }
    ::flock(f.fd, LOCK_UN);
    // Its writer ended: NIXL's totals of a process gone are not served.
    f.forget();
    f.done = true;
    return false;
}

void multiproc_stores::refuse(const std::string& name,
                              store_file& f,
                              node::refusal why,
                              const std::string& what) {
    f.forget();  // nothing of a refused store is served
    f.done = true;
    if (f.reported == why) {
        return;
    }
    f.reported = why;
    files_.count(node::file_kind::nixl_store, why);
    xtel::detail::log(log_level::warning, "{}: NIXL store {} refused ({}): {}", settings_.program,
                      parse::escape_controls((settings_.dir / name).string()), node::to_string(why),
                      what);
}

}  // namespace xtel::nixl
