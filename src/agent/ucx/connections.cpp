// Remote agents: this agent's metadata out, theirs in (endpoints and remote keys), disconnects,
// and what happens when an endpoint fails or a peer in this process is destroyed.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "agent/ucx/backend_impl.hpp"
#include "xtel/core/names.hpp"

namespace xtel::detail {

using namespace ucx;

namespace {

/// The transports an endpoint's lanes use, with how many lanes each ("sysv" -> 1). UCX 1.13 has
/// no query for it, so this reads the endpoint's printed description ("lane[0]: 3:sysv/memory.0
/// md[2] ..."); a format it does not recognise yields nothing rather than an error.
std::vector<std::pair<std::string, std::uint64_t>> transports_of(ucp_ep_h ep) {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    char* text = nullptr;
    std::size_t size = 0;
    FILE* f = ::open_memstream(&text, &size);
    if (f == nullptr) {
        return out;
    }
    ::ucp_ep_print_info(ep, f);
    std::fclose(f);
    std::string_view rest(text, size);
    while (!rest.empty()) {
        const auto eol = rest.find('\n');
        const std::string_view line = rest.substr(0, eol);
        rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
        const auto lane = line.find("lane[");
        const auto colon = lane == std::string_view::npos ? lane : line.find("]:", lane);
        if (colon == std::string_view::npos) {
            continue;
        }
        std::string_view token = line.substr(colon + 2);
        token.remove_prefix(std::min(token.find_first_not_of(' '), token.size()));
        token = token.substr(0, token.find(' '));
        const auto index_end = token.find(':');
        const auto slash = token.find('/');
        if (index_end == std::string_view::npos || slash == std::string_view::npos ||
            slash <= index_end + 1) {
            continue;
        }
        const std::string tl(token.substr(index_end + 1, slash - index_end - 1));
        const auto it =
            std::find_if(out.begin(), out.end(), [&](auto& p) { return p.first == tl; });
        if (it == out.end()) {
            out.emplace_back(tl, 1);
        } else {
            ++it->second;
        }
    }
    std::free(text);
    return out;
}

}  // namespace

// ---- failures and closing ---------------------------------------------------------------------

/// Endpoint failures arrive inside ucp_worker_progress; the endpoint is closed after it.
void ucx_backend::impl::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t st) {
    auto* r = static_cast<remote_agent*>(arg);
    r->owner->endpoint_failed(
        *r,
        fail(code_of(st) == status_code::backend_error ? status_code::remote_disconnected
                                                       : code_of(st),
             "the connection to agent '{}' failed: {} (UCX)", r->name, ::ucs_status_string(st)));
}

void ucx_backend::impl::endpoint_failed(remote_agent& r, status why) noexcept {
    if (r.failed || r.closed) {
        return;
    }
    r.failed = true;
    r.failure = std::move(why);
    sink(category::backend, names::ucx_endpoint_error, 1, value_kind::counter);
    note_disconnect();
    try {
        to_close.push_back(&r);
    } catch (...) {
        // Closed at disconnect or shutdown instead.
    }
}

/// Force-closes the endpoint (UCX completes what is outstanding on it, cancelled), then
/// destroys the remote keys: after the operations that used them are gone, and before
/// anything else could use them.
void ucx_backend::impl::close(remote_agent& r) noexcept {
    if (r.closed) {
        return;
    }
    r.closed = true;
    if (!r.failed) {
        note_disconnect();
    }
    if (r.ep != nullptr) {
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void* req = ::ucp_ep_close_nbx(r.ep, &param);
        if (UCS_PTR_IS_PTR(req)) {
            while (::ucp_request_check_status(req) == UCS_INPROGRESS) {
                ::ucp_worker_progress(worker);
            }
            ::ucp_request_free(req);
        }
        r.ep = nullptr;
    }
    for (auto& reg : r.regions) {
        if (reg.rkey != nullptr) {
            ::ucp_rkey_destroy(reg.rkey);
            reg.rkey = nullptr;
        }
    }
    to_close.erase(std::remove(to_close.begin(), to_close.end(), &r), to_close.end());
}

void ucx_backend::impl::note_disconnect() noexcept {
    sink(category::connection, names::agent_disconnect, 1, value_kind::counter);
    sink(category::connection, names::agent_connections, usable_connections(), value_kind::gauge);
}

std::uint64_t ucx_backend::impl::usable_connections() const noexcept {
    return static_cast<std::uint64_t>(std::count_if(
        remotes.begin(), remotes.end(), [](const auto& p) { return p.second->usable(); }));
}

status ucx_backend::impl::remote_gone(remote_agent& r) noexcept {
    if (!r.failed && !r.closed) {
        // An agent in this process that was destroyed: UCX cannot see it (see local_agents).
        r.failed = true;
        r.failure = fail(status_code::remote_disconnected,
                         "agent '{}' (in this process) has been destroyed", r.name);
        note_disconnect();
        close(r);
    }
    return r.failure.is_error()
               ? r.failure
               : fail(status_code::remote_disconnected, "agent '{}' is not connected", r.name);
}

// ---- metadata -------------------------------------------------------------------------------

status ucx_backend::impl::export_metadata(std::vector<std::byte>& out) const {
    agent_metadata md;
    md.name = name;
    md.incarnation = incarnation;
    md.pid = static_cast<std::uint32_t>(::getpid());
    md.host_id = host_id();
    const auto* a = reinterpret_cast<const std::byte*>(address);
    md.worker_address.assign(a, a + address_length);
    if (local.size() > metadata_max_regions) {
        return fail(status_code::invalid_argument,
                    "agent '{}': {} registered regions do not fit the metadata format "
                    "(at most {})",
                    name, local.size(), metadata_max_regions);
    }
    for (const auto& [addr, region] : local) {
        md.regions.push_back({region.desc, region.rkey});
    }
    out = encode_metadata(md);
    return {};
}

status ucx_backend::impl::unpack(remote_agent& r, std::vector<metadata_region>& from) {
    for (std::size_t i = 0; i < from.size(); ++i) {
        auto& m = from[i];
        const auto same = std::find_if(r.regions.begin(), r.regions.end(), [&](auto& x) {
            return x.current && x.desc == m.region && x.packed == m.rkey;
        });
        if (same != r.regions.end()) {
            continue;
        }
        remote_region reg;
        reg.desc = m.region;
        reg.packed = std::move(m.rkey);
        const ucs_status_t st = ::ucp_ep_rkey_unpack(r.ep, reg.packed.data(), &reg.rkey);
        if (st != UCS_OK) {
            return fail(status_code::bad_metadata,
                        "metadata of agent '{}': the remote key of region {} {} could not "
                        "be unpacked: {}",
                        r.name, i, describe(m.region), ::ucs_status_string(st));
        }
        r.regions.push_back(std::move(reg));
    }
    return {};
}

void ucx_backend::impl::sort_regions(remote_agent& r) {
    std::sort(r.regions.begin(), r.regions.end(),
              [](auto& a, auto& b) { return a.desc.address < b.desc.address; });
}

// ---- connecting -----------------------------------------------------------------------------

status ucx_backend::impl::load(std::span<const std::byte> blob, std::string& remote_name) {
    agent_metadata md;
    if (status st = decode_metadata(blob, md); !st.ok()) {
        return st;
    }
    remote_name = md.name;
    std::shared_ptr<const std::atomic<bool>> remote_alive;
    if (md.pid == static_cast<std::uint32_t>(::getpid()) && md.host_id == host_id()) {
        remote_alive = local_agents::instance().find(md.incarnation);
        if (!remote_alive) {
            return fail(status_code::remote_disconnected,
                        "agent '{}' lived in this process and has been destroyed", md.name);
        }
    }

    const auto existing = remotes.find(md.name);
    if (existing != remotes.end() && existing->second->usable() &&
        existing->second->incarnation == md.incarnation) {
        return refresh(*existing->second, md);
    }
    std::shared_ptr<remote_agent> r;
    if (status st = connect(md, std::move(remote_alive), r); !st.ok()) {
        return st;
    }
    if (existing != remotes.end()) {
        // A new incarnation under the same name (a restarted process): the old connection
        // goes; transfers made for it fail when posted.
        existing->second->failure =
            fail(status_code::remote_disconnected,
                 "agent '{}' was replaced by a new agent of that name", md.name);
        close(*existing->second);
        remotes.erase(existing);
    }
    remotes.emplace(md.name, r);
    announce(*r);
    return {};
}

/// The same agent announcing its regions again: keep the connection, add new regions, retire
/// the ones it no longer lists (transfers made before keep them).
status ucx_backend::impl::refresh(remote_agent& r, agent_metadata& md) {
    for (auto& reg : r.regions) {
        reg.current = std::any_of(md.regions.begin(), md.regions.end(), [&](auto& m) {
            return m.region == reg.desc && m.rkey == reg.packed;
        });
    }
    status st = unpack(r, md.regions);
    sort_regions(r);
    return st;
}

/// A new connection to the agent `md` describes, its endpoint made and its regions unpacked;
/// `out` is set only when it succeeds.
status ucx_backend::impl::connect(agent_metadata& md,
                                  std::shared_ptr<const std::atomic<bool>> remote_alive,
                                  std::shared_ptr<remote_agent>& out) {
    auto r = std::make_shared<remote_agent>();
    r->owner = this;
    r->name = md.name;
    r->incarnation = md.incarnation;
    r->alive = std::move(remote_alive);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(md.worker_address.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &impl::on_endpoint_error;
    ep.err_handler.arg = r.get();
    const ucs_status_t st = ::ucp_ep_create(worker, &ep, &r->ep);
    if (st != UCS_OK) {
        r->ep = nullptr;
        r->closed = true;
        return fail(code_of(st) == status_code::backend_error ? status_code::remote_disconnected
                                                              : code_of(st),
                    "agent '{}' cannot be reached: {} (UCX)", md.name, ::ucs_status_string(st));
    }
    if (status u = unpack(*r, md.regions); !u.ok()) {
        r->failed = true;  // never announced as connected
        close(*r);
        return u;
    }
    sort_regions(*r);
    out = std::move(r);
    return {};
}

/// The events of a new connection: the connect, the count, and its transports.
void ucx_backend::impl::announce(remote_agent& r) {
    sink(category::connection, names::agent_connect, 1, value_kind::counter);
    sink(category::connection, names::agent_connections, usable_connections(), value_kind::gauge);
    std::uint64_t all = 0;
    for (const auto& [tl, lanes] : transports_of(r.ep)) {
        const std::string event = fmt::format("{}{}", names::ucx_transport_prefix, tl);
        sink(category::backend, event_name(event), lanes, value_kind::gauge);
        all += lanes;
    }
    r.lanes = static_cast<std::uint8_t>(std::min<std::uint64_t>(all, 255));
}

status ucx_backend::impl::disconnect(std::string_view remote_name) {
    const auto it = remotes.find(remote_name);
    if (it == remotes.end()) {
        return fail(status_code::not_found, "agent '{}': no remote agent '{}' is loaded", name,
                    remote_name);
    }
    const auto busy = std::count_if(transfers.begin(), transfers.end(), [&](auto& t) {
        return t.st == state::in_progress && t.remote == it->second;
    });
    if (busy > 0) {
        return fail(status_code::busy,
                    "agent '{}': {} transfer(s) to '{}' are in progress; poll them to "
                    "completion first",
                    name, busy, remote_name);
    }
    it->second->failure = fail(status_code::remote_disconnected,
                               "agent '{}' was disconnected from '{}'", name, remote_name);
    close(*it->second);
    remotes.erase(it);
    return {};
}

status ucx_backend::impl::regions_of(std::string_view remote_name,
                                     std::vector<descriptor>& out) const {
    const auto it = remotes.find(remote_name);
    if (it == remotes.end()) {
        return fail(status_code::not_found, "agent '{}': no remote agent '{}' is loaded", name,
                    remote_name);
    }
    out.clear();
    for (const auto& reg : it->second->regions) {
        if (reg.current) {
            out.push_back(reg.desc);
        }
    }
    return {};
}

// ---- the public object --------------------------------------------------------------------

status ucx_backend::export_metadata(std::vector<std::byte>& out) const {
    return impl_->export_metadata(out);
}

status ucx_backend::load_remote_metadata(std::span<const std::byte> blob,
                                         std::string& remote_name) {
    return impl_->load(blob, remote_name);
}

status ucx_backend::disconnect(std::string_view remote_name) {
    return impl_->disconnect(remote_name);
}

status ucx_backend::remote_regions(std::string_view remote_name,
                                   std::vector<descriptor>& out) const {
    return impl_->regions_of(remote_name, out);
}

std::size_t ucx_backend::connections() const noexcept {
    return impl_->usable_connections();
}

}  // namespace xtel::detail
