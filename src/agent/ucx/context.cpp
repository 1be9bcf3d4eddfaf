// The backend's life: UCX's settings, context and worker at start-up, with the start-up events;
// at shutdown, what is left of transfers, connections and memory, then UCX itself.

#include <algorithm>
#include <array>
#include <cstdlib>
#include <random>

#include "agent/ucx/backend_impl.hpp"
#include "core/log.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/names.hpp"

namespace xtel::detail {

using namespace ucx;

namespace {

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

/// Applies xtel's defaults (ucx_defaults) the user did not set.
void apply_defaults(ucp_config_t* cfg) {
    for (const auto& d : ucx_defaults) {
        const bool applies =
            std::string_view(d.name) != "MM_ERROR_HANDLING" || shared_memory_allowed();
        if (applies && !user_set(d)) {
            const ucs_status_t m = ::ucp_config_modify(cfg, d.name, d.value);
            if (m != UCS_OK) {
                detail::log(log_level::debug, "UCX setting {}={} not applied: {}", d.name, d.value,
                            ::ucs_status_string(m));
            }
        }
    }
}

}  // namespace

// ---- helpers shared by the backend's files ----------------------------------------------------

std::string ucx::describe(const descriptor& d) {
    return fmt::format("[{:#x}, +{}) {}", d.address, d.length, to_string(d.kind));
}

status_code ucx::code_of(ucs_status_t s) noexcept {
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

local_agents& local_agents::instance() {
    static auto* registry = new local_agents;
    return *registry;
}

std::shared_ptr<std::atomic<bool>> local_agents::add(std::uint64_t incarnation) {
    auto flag = std::make_shared<std::atomic<bool>>(true);
    const std::lock_guard lock(mutex_);
    live_[incarnation] = flag;
    return flag;
}

std::shared_ptr<const std::atomic<bool>> local_agents::find(std::uint64_t incarnation) const {
    const std::lock_guard lock(mutex_);
    const auto it = live_.find(incarnation);
    return it == live_.end() ? nullptr : it->second;
}

void local_agents::remove(std::uint64_t incarnation) {
    const std::lock_guard lock(mutex_);
    live_.erase(incarnation);
}

// ---- start-up ---------------------------------------------------------------------------------

ucx_backend::impl::impl(std::string_view agent_name, backend_options opts, event_sink s)
    : name(agent_name), options(opts), sink(s), incarnation(random_incarnation()) {
    start_context();
    start_worker();
    alive = local_agents::instance().add(incarnation);
    unsigned major = 0, minor = 0, release = 0;
    ::ucp_get_version(&major, &minor, &release);
    sink(category::backend, names::ucx_backend_init, 1, value_kind::counter);
    sink(category::backend, names::ucx_version, major * 10000u + minor * 100u + release,
         value_kind::gauge);
}

ucx_backend::impl::~impl() {
    shutdown();
}

void ucx_backend::impl::start_context() {
    ucp_config_t* cfg = nullptr;
    const ucs_status_t st = ::ucp_config_read(nullptr, nullptr, &cfg);
    if (st != UCS_OK) {
        throw agent_error(fmt::format("agent '{}': UCX configuration could not be read: {}", name,
                                      ::ucs_status_string(st)));
    }
    apply_defaults(cfg);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    // AM: notifications (notifications.cpp) are active messages.
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    params.name = name.c_str();
    const ucs_status_t init = ::ucp_init(&params, cfg, &context);
    ::ucp_config_release(cfg);
    if (init != UCS_OK) {
        throw agent_error(fmt::format("agent '{}': UCX did not start (ucp_init: {})", name,
                                      ::ucs_status_string(init)));
    }
}

void ucx_backend::impl::start_worker() {
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    ucs_status_t st = ::ucp_worker_create(context, &wp, &worker);
    if (st == UCS_OK) {
        st = ::ucp_worker_get_address(worker, &address, &address_length);
    }
    if (st == UCS_OK) {
        ucp_am_handler_param_t am{};
        am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG;
        am.id = notification_am_id;
        am.cb = &impl::on_notification;
        am.arg = this;
        st = ::ucp_worker_set_am_recv_handler(worker, &am);
    }
    if (st != UCS_OK) {
        teardown_ucx();
        throw agent_error(
            fmt::format("agent '{}': UCX worker did not start: {}", name, ::ucs_status_string(st)));
    }
}

void ucx_backend::impl::teardown_ucx() noexcept {
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

// ---- shutdown ---------------------------------------------------------------------------------

void ucx_backend::impl::shutdown() noexcept {
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
    cancel_all();
    for (auto& [a, region] : local) {
        ::ucp_mem_unmap(context, region.memh);
    }
    local.clear();
    registered = 0;
    teardown_ucx();
}

bool ucx_backend::impl::any_running() const noexcept {
    // Notifications in flight too: a closing endpoint would cancel the last one a program sent.
    return std::any_of(transfers.begin(), transfers.end(),
                       [](const transfer& t) {
                           return t.request != nullptr &&
                                  ::ucp_request_check_status(t.request) == UCS_INPROGRESS;
                       }) ||
           std::any_of(sends.begin(), sends.end(), [](const pending_send& p) {
               return ::ucp_request_check_status(p.request) == UCS_INPROGRESS;
           });
}

/// After the connections closed: closing them cancelled whatever UCX still held; collects those
/// requests and empties the transfer slots.
void ucx_backend::impl::cancel_all() noexcept {
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
    for (pending_send& p : sends) {
        wait_and_free(p.request);
    }
    sends.clear();
}

/// At shutdown: progresses until UCX is done with `req` (a second at most), then frees it;
/// one UCX never completes is left to UCX rather than freed while in use.
void ucx_backend::impl::wait_and_free(void*& req) noexcept {
    const auto give_up = clock::monotonic_us() + 1'000'000;
    while (::ucp_request_check_status(req) == UCS_INPROGRESS && clock::monotonic_us() < give_up) {
        ::ucp_worker_progress(worker);
    }
    if (::ucp_request_check_status(req) != UCS_INPROGRESS) {
        ::ucp_request_free(req);
    }
    req = nullptr;
}

// ---- the public object --------------------------------------------------------------------

ucx_backend::ucx_backend(std::string_view agent_name, backend_options opts, event_sink sink)
    : impl_(std::make_unique<impl>(agent_name, opts, sink)) {}

ucx_backend::~ucx_backend() = default;

void ucx_backend::shutdown() noexcept {
    impl_->shutdown();
}

}  // namespace xtel::detail
