#include "xtel/nixl/buffer_rings.hpp"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/log.hpp"
#include "nixl/event_mapping.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/label_table.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/nixl/buffer_ring.hpp"

namespace xtel::nixl {

struct buffer_rings::ring {
    node::file_identity id;
    int fd = -1;
    std::optional<buffer_ring::reader> reader;
    /// Made at the first drain the header allows; null while refused.
    std::unique_ptr<metrics::agent_metrics> model;
    /// NIXL's events name no peer: the table holds none but `unknown`.
    label_table labels{16};
    /// Refused until the file changes.
    bool refused = false;
    /// The refusal logged and counted last: a file is reported once per reason.
    std::optional<node::refusal> reported;
    std::vector<abi_v2::event> events;
    mapped_flush mapped;
    /// The model's latest snapshot, and it as served: as a node file would carry it.
    std::shared_ptr<const metrics::snapshot> published;
    std::shared_ptr<const metrics::snapshot> served;

    ring() = default;
    ring(const ring&) = delete;
    ring& operator=(const ring&) = delete;
    ~ring() { close(); }

    void close() noexcept {
        reader.reset();
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
    }
};

namespace {

using buffer_rings_ring = buffer_rings::ring;

node::scanner::settings scanner_settings(const buffer_rings::settings& s) {
    return {.dir = s.dir,
            .program = s.program,
            .allowed_uids = s.allowed_uids,
            .max_file_bytes = 0,
            .span_rings = false,
            .nixl_rings = true,
            .max_nixl_ring_bytes = buffer_ring::max_file_bytes};
}

/// Whether one of `globs` matches `family`; true when there are none.
bool chosen(const std::vector<std::string>& globs, std::string_view family) {
    return globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
               return metrics::glob_matches(g, family);
           });
}

/// The latest snapshot of `r`'s model as a node file's reader serves it: without the labels a
/// reader adds itself (the model's xtel_agent_info names this process's pid, not the agent's,
/// which a ring does not say), and with only the families `globs` choose. Made again only when
/// the model published another.
std::shared_ptr<const metrics::snapshot> served(buffer_rings_ring& r,
                                                const std::vector<std::string>& globs) {
    if (r.model == nullptr) {
        return nullptr;
    }
    auto latest = r.model->latest();
    if (latest != r.published) {
        std::vector<std::byte> encoded;
        metrics::encode_snapshot(*latest, encoded, metrics::reserved_label_names);
        metrics::snapshot s = metrics::decode_snapshot(encoded);
        std::erase_if(s.families, [&](const metrics::family_snapshot& f) {
            return !chosen(globs, f.spec.name);
        });
        r.served = std::make_shared<const metrics::snapshot>(std::move(s));
        r.published = std::move(latest);
    }
    return r.served;
}

}  // namespace

buffer_rings::buffer_rings(settings s)
    : settings_(std::move(s)), files_(scanner_settings(settings_)) {}

buffer_rings::~buffer_rings() = default;

std::vector<std::shared_ptr<const metrics::snapshot>> buffer_rings::refresh() noexcept {
    std::vector<std::shared_ptr<const metrics::snapshot>> out;
    try {
        if (const std::shared_ptr<const node::listing> l = files_.scan()) {
            const auto& listed = l->of(node::file_kind::nixl_ring);
            std::erase_if(rings_, [&](const auto& r) { return !listed.contains(r.first); });
            for (const auto& [name, id] : listed) {
                auto it = rings_.find(name);
                if (it != rings_.end() && !it->second.id.same_file(id)) {
                    rings_.erase(it);  // another file under the name: another agent's ring
                    it = rings_.end();
                }
                if (it == rings_.end()) {
                    it = rings_.try_emplace(name).first;
                }
                ring& r = it->second;
                if (r.refused && r.id == id) {
                    continue;  // looked at again when it changes
                }
                r.id = id;
                if (r.fd < 0) {
                    open(*l, name, r);
                }
                if (r.fd >= 0) {
                    drain(name, r);
                }
            }
        }
        for (auto& [name, r] : rings_) {
            if (auto s = served(r, settings_.families)) {
                out.push_back(std::move(s));
            }
        }
    } catch (const std::exception& e) {
        xtel::detail::log(log_level::error, "{}: reading NIXL rings in {} failed: {}",
                          settings_.program, settings_.dir.string(), e.what());
    }
    return out;
}

void buffer_rings::open(const node::listing& l, const std::string& name, ring& r) {
    node::opened o = files_.open(l, node::file_kind::nixl_ring, name);
    if (o.refused) {
        if (!o.retry) {
            refuse(name, r, *o.refused, o.why);
        }
        return;
    }
    if (o.fd() < 0) {
        return;  // gone since it was listed
    }
    r.fd = o.release();
    r.reader.emplace(r.fd);
    r.refused = false;
}

void buffer_rings::drain(const std::string& name, ring& r) {
    r.events.clear();
    const buffer_ring::checked c = r.reader->drain(r.events);
    switch (c.what) {
        case buffer_ring::verdict::not_ready:
            return;
        case buffer_ring::verdict::not_nixl:
            refuse(name, r, node::refusal::not_nixl_file, c.why);
            return;
        case buffer_ring::verdict::damaged:
            refuse(name, r, node::refusal::damaged, c.why);
            return;
        case buffer_ring::verdict::ok:
            break;
    }
    if (r.model == nullptr) {
        r.model = std::make_unique<metrics::agent_metrics>(name, settings_.model);
    }
    r.reported.reset();
    r.mapped.clear();
    map_flush(r.events, clock::now_us(), r.mapped);
    if (!r.mapped.transfers.empty()) {
        r.model->apply_transfers(r.mapped.transfers, r.labels);
    }
    if (!r.mapped.events.empty()) {
        r.model->apply(r.mapped.events);
    }
    r.model->publish();
}

void buffer_rings::refuse(const std::string& name,
                          ring& r,
                          node::refusal why,
                          const std::string& what) {
    r.close();
    r.model.reset();  // nothing of a refused ring is served
    r.refused = true;
    if (r.reported == why) {
        return;
    }
    r.reported = why;
    files_.count(node::file_kind::nixl_ring, why);
    xtel::detail::log(log_level::warning, "{}: NIXL ring {} refused ({}): {}", settings_.program,
                      parse::escape_controls((settings_.dir / name).string()), node::to_string(why),
                      what);
}

}  // namespace xtel::nixl
