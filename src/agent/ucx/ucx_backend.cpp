#include "xtel/ucx_backend.hpp"

#include <ucp/api/ucp.h>
#include <unistd.h>

#include <fmt/format.h>

#if defined(XTEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>
#include <utility>

#include "core/log.hpp"
#include "xtel/agent_events.hpp"
#include "xtel/agent_metadata.hpp"
#include "xtel/clock.hpp"

namespace xtel::detail {

namespace {

/// Builds an error status; formatting runs out of memory only in a process already in
/// trouble, and then the status keeps its code without a message rather than throwing.
template <class... Args>
status fail(status_code code, fmt::format_string<Args...> f, Args&&... args) noexcept {
    try {
        return status(code, fmt::format(f, std::forward<Args>(args)...));
    } catch (...) {
        return status(code, std::string());
    }
}

std::string describe(const descriptor& d) {
    return fmt::format("[{:#x}, +{}) {}", d.address, d.length, to_string(d.kind));
}

/// How a UCX failure reads to the agent's user.
status_code code_of(ucs_status_t s) noexcept {
    switch (s) {
        case UCS_ERR_ENDPOINT_TIMEOUT:
        case UCS_ERR_CONNECTION_RESET:
        case UCS_ERR_UNREACHABLE:
        case UCS_ERR_NOT_CONNECTED:
        case UCS_ERR_REJECTED:
        case UCS_ERR_CANCELED:
            return status_code::remote_disconnected;
        case UCS_ERR_TIMED_OUT:
            return status_code::timed_out;
        default:
            return status_code::backend_error;
    }
}

/// Agents alive in this process, by incarnation. UCX cannot see that an agent in the same
/// process went away (its shared-memory checks watch the process, which lives on), and a write
/// into memory that a destroyed agent freed would corrupt the heap; so transfers to an agent in
/// this process check its flag here. Leaked on purpose: agents may be destroyed after static
/// destructors have run.
class local_agents {
  public:
    static local_agents& instance() {
        static auto* registry = new local_agents;
        return *registry;
    }

    std::shared_ptr<std::atomic<bool>> add(std::uint64_t incarnation) {
        auto flag = std::make_shared<std::atomic<bool>>(true);
        const std::lock_guard lock(mutex_);
        live_[incarnation] = flag;
        return flag;
    }

    std::shared_ptr<const std::atomic<bool>> find(std::uint64_t incarnation) const {
        const std::lock_guard lock(mutex_);
        const auto it = live_.find(incarnation);
        return it == live_.end() ? nullptr : it->second;
    }

    void remove(std::uint64_t incarnation) {
        const std::lock_guard lock(mutex_);
        live_.erase(incarnation);
    }

  private:
    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, std::shared_ptr<std::atomic<bool>>> live_;
};

std::uint64_t random_incarnation() {
    std::random_device rd;
    std::uint64_t v = 0;
    while (v == 0) {
        v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ clock::monotonic_us();
    }
    return v;
}

/// A UCX setting xtel changes from UCX's default, unless the user set it through any of the
/// environment variables that control it.
struct ucx_default {
    const char* name;  ///< for ucp_config_modify
    const char* value;
    std::array<const char*, 3> overridden_by;
};
// Shared-memory transports serve endpoints in peer-failure mode only with error handling on
// (MM_ covers posix and sysv); without it UCX falls back to TCP on loopback for every lane
// (measured here: 0.4 GB/s instead of 10-20 GB/s for 64 KiB writes). The keepalive interval
// bounds how long a dead peer goes unnoticed while an agent polls (UCX's default is 20 s).
constexpr ucx_default ucx_defaults[] = {
    {"MM_ERROR_HANDLING",
     "y",
     {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING", "UCX_SYSV_ERROR_HANDLING"}},
    {"KEEPALIVE_INTERVAL", "1s", {"UCX_KEEPALIVE_INTERVAL", nullptr, nullptr}},
};

bool user_set(const ucx_default& d) {
    return std::any_of(d.overridden_by.begin(), d.overridden_by.end(), [](const char* var) {
        return var != nullptr && std::getenv(var) != nullptr;
    });
}

/// Whether UCX_TLS leaves shared memory in; UCX warns about a shared-memory setting when no
/// shared-memory transport is in use.
bool shared_memory_allowed() {
    constexpr std::string_view shared_memory_names[] = {"all", "sm", "shm", "mm", "posix", "sysv"};
    const char* tls = std::getenv("UCX_TLS");
    if (tls == nullptr || tls[0] == '^') {
        return true;
    }
    const std::string_view list(tls);
    return std::any_of(std::begin(shared_memory_names), std::end(shared_memory_names),
                       [&](std::string_view n) { return list.find(n) != std::string_view::npos; });
}

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

// ---------------------------------------------------------------------------------------------

struct ucx_backend::impl {
    struct local_region {
        descriptor desc;
        ucp_mem_h memh = nullptr;
        std::vector<std::byte> rkey;
        bool allocated = false;
        std::uint32_t users = 0;  ///< operations of live transfers that use it
    };

    struct remote_region {
        descriptor desc;
        std::vector<std::byte> packed;
        ucp_rkey_h rkey = nullptr;
        bool current = true;  ///< false once a refreshed metadata no longer lists it
    };

    struct remote_agent {
        impl* owner = nullptr;
        std::string name;
        std::uint64_t incarnation = 0;
        ucp_ep_h ep = nullptr;
        std::vector<remote_region> regions;
        /// Set when the remote agent lives in this process (see local_agents).
        std::shared_ptr<const std::atomic<bool>> alive;
        bool failed = false;
        bool closed = false;
        status failure;

        bool usable() const noexcept {
            return !failed && !closed && (!alive || alive->load(std::memory_order_acquire));
        }
    };

    struct rma_op {
        void* local;
        std::uint64_t remote;
        std::size_t length;
        ucp_rkey_h rkey;
        ucp_mem_h memh;
        local_region* region;
    };

    enum class state : std::uint8_t { free, created, in_progress, done, failed };

    /// A transfer's slot. Laid out for post: the first line holds what the agent counts and
    /// the slot's state; the second what post reads to issue the operations.
    struct alignas(cache_line) transfer {
        transfer_state info;  // what the agent keeps of it
        std::uint32_t generation = 1;
        state st = state::free;
        transfer_op op = transfer_op::write;
        std::shared_ptr<remote_agent> remote;
        std::vector<rma_op> ops;
        std::uint32_t idle_polls = 0;
        void* request = nullptr;  ///< the flush request while in progress
        std::uint64_t deadline_us = 0;
        status failure;
    };
    static_assert(offsetof(transfer, op) < cache_line && offsetof(transfer, remote) >= cache_line);

    // ---- set-up ------------------------------------------------------------------------------

    impl(std::string_view agent_name, backend_options opts, event_sink s)
        : name(agent_name), options(opts), sink(s), incarnation(random_incarnation()) {
        ucp_config_t* cfg = nullptr;
        ucs_status_t st = ::ucp_config_read(nullptr, nullptr, &cfg);
        if (st != UCS_OK) {
            throw agent_error(fmt::format("agent '{}': UCX configuration could not be read: {}",
                                          name, ::ucs_status_string(st)));
        }
        for (const auto& d : ucx_defaults) {
            const bool applies =
                std::string_view(d.name) != "MM_ERROR_HANDLING" || shared_memory_allowed();
            if (applies && !user_set(d)) {
                const ucs_status_t m = ::ucp_config_modify(cfg, d.name, d.value);
                if (m != UCS_OK) {
                    detail::log(log_level::debug, "UCX setting {}={} not applied: {}", d.name,
                                d.value, ::ucs_status_string(m));
                }
            }
        }
        ucp_params_t params{};
        params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
        params.features = UCP_FEATURE_RMA;
        params.name = name.c_str();
        st = ::ucp_init(&params, cfg, &context);
        ::ucp_config_release(cfg);
        if (st != UCS_OK) {
            throw agent_error(fmt::format("agent '{}': UCX did not start (ucp_init: {})", name,
                                          ::ucs_status_string(st)));
        }
        ucp_worker_params_t wp{};
        wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
        st = ::ucp_worker_create(context, &wp, &worker);
        if (st == UCS_OK) {
            st = ::ucp_worker_get_address(worker, &address, &address_length);
        }
        if (st != UCS_OK) {
            teardown_ucx();
            throw agent_error(fmt::format("agent '{}': UCX worker did not start: {}", name,
                                          ::ucs_status_string(st)));
        }
        alive = local_agents::instance().add(incarnation);
        unsigned major = 0, minor = 0, release = 0;
        ::ucp_get_version(&major, &minor, &release);
        sink(category::backend, names::ucx_backend_init, 1, value_kind::counter);
        sink(category::backend, names::ucx_version, major * 10000u + minor * 100u + release,
             value_kind::gauge);
    }

    ~impl() { shutdown(); }

    void teardown_ucx() noexcept {
        if (address != nullptr) {
            ::ucp_worker_release_address(worker, address);
            address = nullptr;
        }
        if (worker != nullptr) {
            ::ucp_worker_destroy(worker);
            worker = nullptr;
        }
        if (context != nullptr) {
            ::ucp_cleanup(context);
            context = nullptr;
        }
    }

    void shutdown() noexcept {
        if (worker == nullptr) {
            return;
        }
        // Peers in this process stop writing here first.
        alive->store(false, std::memory_order_release);
        local_agents::instance().remove(incarnation);

        // Let transfers the user did not poll to the end finish, for a while; what is left is
        // cancelled when its connection closes.
        const auto give_up = clock::monotonic_us() + 1'000'000;
        while (any_running() && clock::monotonic_us() < give_up) {
            progress_once();
        }
        for (auto& [n, r] : remotes) {
            close(*r);
        }
        remotes.clear();
        // Closing the connections cancelled whatever UCX still held; collect those requests.
        for (auto& t : transfers) {
            if (t.request != nullptr) {
                wait_and_free(t.request);
            }
            for (auto& op : t.ops) {
                --op.region->users;
            }
            t = transfer{};
        }
        for (void*& req : orphans) {
            wait_and_free(req);
        }
        orphans.clear();
        for (auto& [a, region] : local) {
            ::ucp_mem_unmap(context, region.memh);
        }
        local.clear();
        registered = 0;
        teardown_ucx();
    }

    bool any_running() const noexcept {
        return std::any_of(transfers.begin(), transfers.end(), [](const transfer& t) {
            return t.request != nullptr && ::ucp_request_check_status(t.request) == UCS_INPROGRESS;
        });
    }

    // ---- progress ----------------------------------------------------------------------------

    unsigned progress_once() noexcept {
        const unsigned n = ::ucp_worker_progress(worker);
        if (!to_close.empty()) [[unlikely]] {
            close_failed();
        }
        return n;
    }

    /// Endpoint failures arrive inside ucp_worker_progress; the endpoint is closed after it.
    static void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t st) {
        auto* r = static_cast<remote_agent*>(arg);
        r->owner->endpoint_failed(
            *r, fail(code_of(st) == status_code::backend_error ? status_code::remote_disconnected
                                                               : code_of(st),
                     "the connection to agent '{}' failed: {} (UCX)", r->name,
                     ::ucs_status_string(st)));
    }

    void endpoint_failed(remote_agent& r, status why) noexcept {
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

    void close_failed() noexcept {
        auto pending = std::move(to_close);
        to_close.clear();
        for (remote_agent* r : pending) {
            close(*r);
        }
    }

    /// Force-closes the endpoint (UCX completes what is outstanding on it, cancelled), then
    /// destroys the remote keys: after the operations that used them are gone, and before
    /// anything else could use them.
    void close(remote_agent& r) noexcept {
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

    void note_disconnect() noexcept {
        sink(category::connection, names::agent_disconnect, 1, value_kind::counter);
        sink(category::connection, names::agent_connections, usable_connections(),
             value_kind::gauge);
    }

    std::uint64_t usable_connections() const noexcept {
        return static_cast<std::uint64_t>(std::count_if(
            remotes.begin(), remotes.end(), [](const auto& p) { return p.second->usable(); }));
    }

    /// Requests of transfers that failed before UCX finished with them; freed once complete.
    void free_orphans() noexcept {
        for (std::size_t i = 0; i < orphans.size();) {
            if (::ucp_request_check_status(orphans[i]) != UCS_INPROGRESS) {
                ::ucp_request_free(orphans[i]);
                orphans[i] = orphans.back();
                orphans.pop_back();
            } else {
                ++i;
            }
        }
    }

    /// At shutdown: progresses until UCX is done with `req` (a second at most), then frees it;
    /// one UCX never completes is left to UCX rather than freed while in use.
    void wait_and_free(void*& req) noexcept {
        const auto give_up = clock::monotonic_us() + 1'000'000;
        while (::ucp_request_check_status(req) == UCS_INPROGRESS &&
               clock::monotonic_us() < give_up) {
            ::ucp_worker_progress(worker);
        }
        if (::ucp_request_check_status(req) != UCS_INPROGRESS) {
            ::ucp_request_free(req);
        }
        req = nullptr;
    }

    // ---- memory ------------------------------------------------------------------------------

    local_region* find_local(const descriptor& d) noexcept {
        auto it = local.upper_bound(d.address);
        if (it == local.begin()) {
            return nullptr;
        }
        --it;
        const descriptor& r = it->second.desc;
        const bool inside = d.address >= r.address && d.end() <= r.end() && d.end() >= d.address;
        return inside && r.kind == d.kind && r.device == d.device ? &it->second : nullptr;
    }

    status check_new_region(const descriptor& d) const {
        if (d.length == 0 || d.address == 0 || d.end() < d.address) {
            return fail(status_code::invalid_argument,
                        "agent '{}': cannot register {}: expected a non-null address and a "
                        "length of at least 1 byte that does not wrap around",
                        name, describe(d));
        }
        if (d.kind != memory_kind::dram && d.kind != memory_kind::vram) {
            return fail(status_code::invalid_argument,
                        "agent '{}': memory kind {} is unknown (expected DRAM or VRAM)", name,
                        static_cast<int>(d.kind));
        }
        auto it = local.lower_bound(d.address);
        if (it != local.end() && it->second.desc.address < d.end()) {
            return fail(status_code::invalid_argument,
                        "agent '{}': {} overlaps the registered region {}", name, describe(d),
                        describe(it->second.desc));
        }
        if (it != local.begin() && std::prev(it)->second.desc.end() > d.address) {
            return fail(status_code::invalid_argument,
                        "agent '{}': {} overlaps the registered region {}", name, describe(d),
                        describe(std::prev(it)->second.desc));
        }
        return {};
    }

    status map(const descriptor& d, bool allocate, descriptor& out) {
        ucp_mem_map_params_t p{};
        p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        p.address = allocate ? nullptr : d.pointer();
        p.length = d.length;
        if (allocate) {
            p.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
            p.flags = UCP_MEM_MAP_ALLOCATE;
        }
        if (d.kind == memory_kind::vram) {
            p.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
            p.memory_type = UCS_MEMORY_TYPE_CUDA;
        }
        local_region region;
        region.desc = d;
        region.allocated = allocate;
        ucs_status_t st = ::ucp_mem_map(context, &p, &region.memh);
        if (st != UCS_OK) {
            return fail(status_code::backend_error, "agent '{}': UCX could not {} {}: {}", name,
                        allocate ? "allocate" : "register", describe(d), ::ucs_status_string(st));
        }
        if (allocate) {
            ucp_mem_attr_t attr{};
            attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
            st = ::ucp_mem_query(region.memh, &attr);
            if (st != UCS_OK) {
                ::ucp_mem_unmap(context, region.memh);
                return fail(status_code::backend_error,
                            "agent '{}': UCX allocated {} bytes but would not say where: {}", name,
                            d.length, ::ucs_status_string(st));
            }
            region.desc.address = reinterpret_cast<std::uintptr_t>(attr.address);
        }
        void* packed = nullptr;
        std::size_t packed_size = 0;
        st = ::ucp_rkey_pack(context, region.memh, &packed, &packed_size);
        if (st != UCS_OK) {
            ::ucp_mem_unmap(context, region.memh);
            return fail(status_code::backend_error,
                        "agent '{}': UCX could not pack a remote key for {}: {}", name, describe(d),
                        ::ucs_status_string(st));
        }
        const auto* b = static_cast<const std::byte*>(packed);
        region.rkey.assign(b, b + packed_size);
        ::ucp_rkey_buffer_release(packed);
        out = region.desc;
        registered += d.length;
        local.emplace(region.desc.address, std::move(region));
        return {};
    }

    status register_memory(const descriptor& d) {
        if (status st = check_new_region(d); !st.ok()) {
            return st;
        }
        if (d.kind == memory_kind::vram) {
            if (status st = vram_support(); !st.ok()) {
                return fail(status_code::not_supported, "agent '{}': cannot register {}: {}", name,
                            describe(d), st.message());
            }
        }
        descriptor out;
        return map(d, false, out);
    }

    status allocate_memory(std::uint64_t bytes, descriptor& out) {
        if (bytes == 0 || bytes > (std::uint64_t{1} << 46)) {
            return fail(status_code::invalid_argument,
                        "agent '{}': cannot allocate {} bytes (expected 1 byte to 64 TiB)", name,
                        bytes);
        }
        const descriptor d{0, bytes, memory_kind::dram, 0};
        return map(d, true, out);
    }

    status deregister_memory(const descriptor& d) {
        const auto it = local.find(d.address);
        if (it == local.end() || it->second.desc != d) {
            return fail(status_code::not_found,
                        "agent '{}': {} is not a registered region (deregister exactly the "
                        "descriptor that was registered)",
                        name, describe(d));
        }
        if (it->second.users > 0) {
            return fail(status_code::busy,
                        "agent '{}': {} is used by {} operation(s) of live transfers; release "
                        "them first",
                        name, describe(d), it->second.users);
        }
        ::ucp_mem_unmap(context, it->second.memh);
        registered -= d.length;
        local.erase(it);
        return {};
    }

    // ---- metadata and connections ----------------------------------------------------------

    status export_metadata(std::vector<std::byte>& out) const {
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

    status unpack(remote_agent& r, std::vector<metadata_region>& from) {
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

    static void sort_regions(remote_agent& r) {
        std::sort(r.regions.begin(), r.regions.end(),
                  [](auto& a, auto& b) { return a.desc.address < b.desc.address; });
    }

    status load(std::span<const std::byte> blob, std::string& remote_name) {
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
            // The same agent announcing its regions again: keep the connection, add new
            // regions, retire the ones it no longer lists (transfers made before keep them).
            remote_agent& r = *existing->second;
            for (auto& reg : r.regions) {
                reg.current = std::any_of(md.regions.begin(), md.regions.end(), [&](auto& m) {
                    return m.region == reg.desc && m.rkey == reg.packed;
                });
            }
            status st = unpack(r, md.regions);
            sort_regions(r);
            return st;
        }

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
        sink(category::connection, names::agent_connect, 1, value_kind::counter);
        sink(category::connection, names::agent_connections, usable_connections(),
             value_kind::gauge);
        for (const auto& [tl, lanes] : transports_of(r->ep)) {
            const std::string event = fmt::format("{}{}", names::ucx_transport_prefix, tl);
            sink(category::backend, event_name(event), lanes, value_kind::gauge);
        }
        return {};
    }

    status disconnect(std::string_view remote_name) {
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

    status regions_of(std::string_view remote_name, std::vector<descriptor>& out) const {
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

    // ---- transfers ---------------------------------------------------------------------------

    static const remote_region* find_remote(const remote_agent& r, const descriptor& d) noexcept {
        // Regions are sorted by address; a retired region may share its address with the
        // current one that replaced it, so look back over the regions that start at or before.
        auto it = std::upper_bound(
            r.regions.begin(), r.regions.end(), d.address,
            [](std::uint64_t a, const remote_region& x) { return a < x.desc.address; });
        while (it != r.regions.begin()) {
            const remote_region& x = *--it;
            if (x.current && x.rkey != nullptr && d.end() <= x.desc.end() && d.end() >= d.address &&
                x.desc.kind == d.kind) {
                return &x;
            }
            if (x.current && x.desc.end() <= d.address) {
                break;  // regions of one agent do not overlap: nothing earlier contains d
            }
        }
        return nullptr;
    }

    status create(transfer_op op,
                  std::span<const descriptor> local_descs,
                  std::span<const descriptor> remote_descs,
                  std::string_view remote_name,
                  const transfer_attributes& attrs,
                  transfer_handle& out) {
        if (op != transfer_op::read && op != transfer_op::write) {
            return fail(status_code::invalid_argument,
                        "agent '{}': transfer operation {} is unknown (expected READ or WRITE)",
                        name, static_cast<int>(op));
        }
        const auto it = remotes.find(remote_name);
        if (it == remotes.end()) {
            return fail(status_code::not_found,
                        "agent '{}': remote agent '{}' is not loaded (load its metadata first)",
                        name, remote_name);
        }
        const auto& remote = it->second;
        if (!remote->usable()) {
            return remote_gone(*remote);
        }
        if (local_descs.empty() || local_descs.size() != remote_descs.size()) {
            return fail(status_code::invalid_argument,
                        "agent '{}': a transfer needs as many remote descriptors as local ones, "
                        "at least one (got {} local, {} remote)",
                        name, local_descs.size(), remote_descs.size());
        }
        std::vector<rma_op> ops;
        ops.reserve(local_descs.size());
        std::uint64_t bytes = 0;
        for (std::size_t i = 0; i < local_descs.size(); ++i) {
            const descriptor& l = local_descs[i];
            const descriptor& r = remote_descs[i];
            if (l.length == 0 || l.length != r.length) {
                return fail(status_code::invalid_argument,
                            "agent '{}': descriptor pair {} has lengths {} (local) and {} "
                            "(remote); expected equal lengths of at least 1 byte",
                            name, i, l.length, r.length);
            }
            local_region* lr = find_local(l);
            if (lr == nullptr) {
                return fail(status_code::not_found,
                            "agent '{}': local descriptor {} {} is not within memory this agent "
                            "registered",
                            name, i, describe(l));
            }
            const remote_region* rr = find_remote(*remote, r);
            if (rr == nullptr) {
                return fail(status_code::not_found,
                            "agent '{}': remote descriptor {} {} is not within memory agent '{}' "
                            "registered (as of its last loaded metadata)",
                            name, i, describe(r), remote_name);
            }
            ops.push_back({l.pointer(), r.address, static_cast<std::size_t>(l.length), rr->rkey,
                           lr->memh, lr});
            bytes += l.length;
        }
        std::uint32_t index = 0;
        if (!free_slots.empty()) {
            index = free_slots.back();
            free_slots.pop_back();
        } else {
            if (transfers.size() >= 0xffffffffu) {
                return fail(status_code::busy, "agent '{}': too many live transfers", name);
            }
            index = static_cast<std::uint32_t>(transfers.size());
            transfers.emplace_back();
        }
        for (auto& o : ops) {
            ++o.region->users;
        }
        transfer& t = transfers[index];
        t.st = state::created;
        t.op = op;
        t.remote = remote;
        t.ops = std::move(ops);
        t.info = {};
        t.info.dir = op == transfer_op::write ? direction::tx : direction::rx;
        t.info.bytes = bytes;
        t.info.attrs = attrs;
        t.failure = {};
        out.id = (static_cast<std::uint64_t>(t.generation) << 32) | (index + 1u);
        return {};
    }

    transfer* find(transfer_handle h) noexcept {
        const std::uint64_t index = h.id & 0xffffffffu;
        if (index == 0 || index > transfers.size()) [[unlikely]] {
            return nullptr;
        }
        transfer& t = transfers[index - 1];
        if (t.generation != (h.id >> 32) || t.st == state::free) [[unlikely]] {
            return nullptr;
        }
        return &t;
    }

    status unknown(transfer_handle h) const noexcept {
        return fail(status_code::invalid_argument,
                    "agent '{}': transfer handle {:#x} is not a live transfer of this agent "
                    "(released, or never created here)",
                    name, h.id);
    }

    status remote_gone(remote_agent& r) noexcept {
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

    /// Ends a transfer in failure; the request, if UCX still holds it, is freed when done. The
    /// outcome hands the agent the transfer's record, so the failure is recorded once.
    status fail_transfer(transfer& t, status why, transfer_outcome& outcome) noexcept {
        outcome.state = &t.info;
        outcome.flags |= transfer_outcome::new_error | transfer_outcome::failed;
        if (t.request != nullptr) {
            if (::ucp_request_check_status(t.request) != UCS_INPROGRESS) {
                ::ucp_request_free(t.request);
            } else {
                try {
                    orphans.push_back(t.request);
                } catch (...) {
                    // Leaked rather than freed while UCX uses it.
                }
            }
            t.request = nullptr;
        }
        t.st = state::failed;
        t.failure = std::move(why);
        return t.failure;
    }

    status post(transfer_handle h, transfer_outcome& outcome) noexcept {
        transfer* t = find(h);
        if (t == nullptr) [[unlikely]] {
            outcome.flags |= transfer_outcome::new_error;
            return unknown(h);
        }
        if (t->st == state::in_progress) [[unlikely]] {
            outcome.flags |= transfer_outcome::new_error;
            return fail(status_code::busy,
                        "agent '{}': transfer {:#x} is in progress; poll it to completion "
                        "before posting it again",
                        name, h.id);
        }
        t->info.timed = false;  // the agent marks the posts it times, after this call
        // Transfers that complete at once (shared memory) are never polled, yet UCX notices a
        // dead peer only while it progresses: so every few posts progress once.
        if ((++posts & (progress_every_posts - 1)) == 0) [[unlikely]] {
            progress_once();
        }
        remote_agent& r = *t->remote;
        if (!r.usable()) [[unlikely]] {
            return fail_transfer(*t, remote_gone(r), outcome);
        }
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
        const bool write = t->op == transfer_op::write;
        for (const rma_op& op : t->ops) {
            param.memh = op.memh;
            void* req = write
                            ? ::ucp_put_nbx(r.ep, op.local, op.length, op.remote, op.rkey, &param)
                            : ::ucp_get_nbx(r.ep, op.local, op.length, op.remote, op.rkey, &param);
            if (UCS_PTR_IS_ERR(req)) [[unlikely]] {
                return fail_transfer(*t, transfer_error(*t, UCS_PTR_STATUS(req)), outcome);
            }
            if (req != nullptr) {
                // Completion is tracked by the flush below, which covers this operation.
                ::ucp_request_free(req);
            }
        }
        ucp_request_param_t flush{};
        void* req = ::ucp_ep_flush_nbx(r.ep, &flush);
        outcome.state = &t->info;
        if (req == nullptr) {
            t->st = state::done;
            count_completion(*t, outcome);
            return {};
        }
        if (UCS_PTR_IS_ERR(req)) [[unlikely]] {
            return fail_transfer(*t, transfer_error(*t, UCS_PTR_STATUS(req)), outcome);
        }
        t->request = req;
        t->st = state::in_progress;
        t->idle_polls = 0;
        t->deadline_us = 0;
        return status::in_progress();
    }

    /// Hands a flagged outcome to the agent (post and poll, on their way out).
    [[gnu::noinline]] void notify(const transfer_outcome& outcome,
                                  const status& st,
                                  transfer_handle h) const noexcept {
        if (sink.outcome != nullptr) {
            sink.outcome(sink.context, outcome, st, h);
        }
    }

    /// A completion, counted in the slot's first line, which the caller has just written.
    static void count_completion(transfer& t, transfer_outcome& outcome) noexcept {
        if (t.info.unreported++ == 0) {
            outcome.flags |= transfer_outcome::first_unreported;
        }
    }

    status transfer_error(transfer& t, ucs_status_t st) noexcept {
        if (t.remote->failed || t.remote->closed) {
            return t.remote->failure;
        }
        return fail(code_of(st), "agent '{}': {} of {} bytes to '{}' failed: {} (UCX)", name,
                    to_string(t.op), t.info.bytes, t.remote->name, ::ucs_status_string(st));
    }

    status poll(transfer_handle h, transfer_outcome& outcome) noexcept {
        transfer* t = find(h);
        if (t == nullptr) [[unlikely]] {
            outcome.flags |= transfer_outcome::new_error;
            return unknown(h);
        }
        switch (t->st) {
            case state::in_progress:
                break;
            case state::done:
                return {};
            case state::failed:
                return t->failure;
            default:
                outcome.flags |= transfer_outcome::new_error;
                return fail(status_code::invalid_argument,
                            "agent '{}': transfer {:#x} has not been posted", name, h.id);
        }
        progress_once();
        const ucs_status_t st = ::ucp_request_check_status(t->request);
        if (st == UCS_INPROGRESS) {
            return still_running(*t, outcome);
        }
        ::ucp_request_free(t->request);
        t->request = nullptr;
        if (st == UCS_OK) [[likely]] {
            t->st = state::done;
            outcome.state = &t->info;
            count_completion(*t, outcome);
            return {};
        }
        return fail_transfer(*t, transfer_error(*t, st), outcome);
    }

    status still_running(transfer& t, transfer_outcome& outcome) noexcept {
        remote_agent& r = *t.remote;
        if (!r.usable()) [[unlikely]] {
            return fail_transfer(t, remote_gone(r), outcome);
        }
        // The deadline costs a clock read only every 1024 polls of a transfer that is slow.
        if (options.transfer_timeout.count() > 0 && (++t.idle_polls & 1023u) == 0) [[unlikely]] {
            const std::uint64_t now = clock::monotonic_us();
            const auto limit = static_cast<std::uint64_t>(options.transfer_timeout.count()) * 1000;
            if (t.deadline_us == 0) {
                t.deadline_us = now + limit;
            } else if (now > t.deadline_us) {
                r.failed = true;
                r.failure = fail(status_code::timed_out,
                                 "agent '{}': a {} of {} bytes to '{}' did not complete within {} "
                                 "ms; the connection to '{}' was closed",
                                 name, to_string(t.op), t.info.bytes, r.name,
                                 options.transfer_timeout.count(), r.name);
                note_disconnect();
                close(r);
                return fail_transfer(t, r.failure, outcome);
            }
        }
        return status::in_progress();
    }

    status release(transfer_handle h) {
        transfer* t = find(h);
        if (t == nullptr) {
            return unknown(h);
        }
        if (t->st == state::in_progress) {
            return fail(status_code::busy,
                        "agent '{}': transfer {:#x} is in progress; poll it to completion before "
                        "releasing it",
                        name, h.id);
        }
        for (auto& op : t->ops) {
            --op.region->users;
        }
        const std::uint32_t next_generation = t->generation + 1 == 0 ? 1 : t->generation + 1;
        *t = transfer{};
        t->generation = next_generation;
        free_slots.push_back(static_cast<std::uint32_t>(t - transfers.data()));
        free_orphans();
        return {};
    }

    // ---- data --------------------------------------------------------------------------------

    std::string name;
    backend_options options;
    event_sink sink;
    std::uint64_t incarnation;
    std::shared_ptr<std::atomic<bool>> alive;

    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_address_t* address = nullptr;
    std::size_t address_length = 0;

    std::map<std::uint64_t, local_region> local;  ///< by start address
    std::uint64_t registered = 0;
    std::map<std::string, std::shared_ptr<remote_agent>, std::less<>> remotes;
    std::vector<remote_agent*> to_close;
    std::vector<transfer> transfers;
    std::vector<std::uint32_t> free_slots;
    std::vector<void*> orphans;
    std::uint32_t posts = 0;
    static constexpr std::uint32_t progress_every_posts = 32;  // a power of two
};

// ---------------------------------------------------------------------------------------------

ucx_backend::ucx_backend(std::string_view agent_name, backend_options opts, event_sink sink)
    : impl_(std::make_unique<impl>(agent_name, opts, sink)) {}

ucx_backend::~ucx_backend() = default;

void ucx_backend::shutdown() noexcept {
    impl_->shutdown();
}

status ucx_backend::register_memory(const descriptor& region) {
    return impl_->register_memory(region);
}

status ucx_backend::allocate_memory(std::uint64_t bytes, descriptor& out) {
    return impl_->allocate_memory(bytes, out);
}

status ucx_backend::deregister_memory(const descriptor& region) {
    return impl_->deregister_memory(region);
}

std::uint64_t ucx_backend::registered_bytes() const noexcept {
    return impl_->registered;
}

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

status ucx_backend::create_transfer(transfer_op op,
                                    std::span<const descriptor> local,
                                    std::span<const descriptor> remote,
                                    std::string_view remote_name,
                                    const transfer_attributes& attrs,
                                    transfer_handle& out) {
    return impl_->create(op, local, remote, remote_name, attrs, out);
}

status ucx_backend::post(transfer_handle h, transfer_outcome& outcome) noexcept {
    status st = impl_->post(h, outcome);
    if (outcome.flags != 0) [[unlikely]] {
        impl_->notify(outcome, st, h);
    }
    return st;
}

status ucx_backend::poll(transfer_handle h, transfer_outcome& outcome) noexcept {
    status st = impl_->poll(h, outcome);
    if (outcome.flags != 0) [[unlikely]] {
        impl_->notify(outcome, st, h);
    }
    return st;
}

status ucx_backend::release(transfer_handle h) {
    return impl_->release(h);
}

transfer_state* ucx_backend::state(transfer_handle h) noexcept {
    impl::transfer* t = impl_->find(h);
    return t == nullptr ? nullptr : &t->info;
}

unsigned ucx_backend::progress() noexcept {
    return impl_->progress_once();
}

status vram_support() {
#if defined(XTEL_HAVE_CUDA)
    int devices = 0;
    const cudaError_t err = ::cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
        return fail(status_code::not_supported, "no CUDA device present (cudaGetDeviceCount: {})",
                    err == cudaSuccess ? "0 devices" : ::cudaGetErrorString(err));
    }
    return {};
#else
    return status(status_code::not_supported,
                  "built without CUDA support (configure with the CUDA Toolkit installed and "
                  "XTEL_WITH_CUDA=ON)");
#endif
}

}  // namespace xtel::detail
