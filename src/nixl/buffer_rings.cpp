#include "xtel/nixl/buffer_rings.hpp"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/log.hpp"
#include "nixl/event_model.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/nixl/buffer_ring.hpp"

namespace xtel::nixl {

struct buffer_rings::ring {
    node::file_identity id;
    int fd = -1;
    std::optional<buffer_ring::reader> reader;
    /// Made at the first drain the header allows; null while refused.
    std::unique_ptr<event_model> model;
    /// Refused until the file changes.
    bool refused = false;
    /// The refusal logged and counted last: a file is reported once per reason.
    std::optional<node::refusal> reported;
    std::vector<abi_v2::event> events;

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

node::scanner::settings scanner_settings(const buffer_rings::settings& s) {
    return {.dir = s.dir,
            .program = s.program,
            .allowed_uids = s.allowed_uids,
            .max_file_bytes = 0,
            .span_rings = false,
            .nixl_rings = true,
            .max_nixl_ring_bytes = buffer_ring::max_file_bytes};
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
            if (r.model != nullptr) {
                out.push_back(r.model->served(settings_.families));
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
        r.model = std::make_unique<event_model>(name, settings_.model);
    }
    r.reported.reset();
    r.model->apply(r.events);
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
