#include "prometheus_endpoint.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>

#include "prometheus_metrics.hpp"
#include "xtel/error.hpp"
#include "xtel/log.hpp"

namespace xtel::detail {

namespace {

constexpr std::string_view metrics_path = "/metrics";
constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view allowed = "GET, HEAD";
/// Scrapes are rare and short; a few workers let a scraper, a health check and a curl meet.
constexpr std::size_t worker_threads = 4;
/// Short, because an idle keep-alive connection holds a worker and delays shutdown by as much.
constexpr time_t keep_alive_seconds = 1;
constexpr auto start_timeout = std::chrono::seconds(5);

struct endpoint_registry {
    std::mutex mutex;
    std::map<std::string, std::weak_ptr<prometheus_endpoint>, std::less<>> by_address;
};

endpoint_registry& registry() {
    static endpoint_registry r;
    return r;
}

std::string listen_failure_reason(int err) {
    switch (err) {
        case EADDRINUSE:
            return "the port is already in use";
        case EACCES:
            return "permission denied (a port below 1024 needs privileges)";
        case EADDRNOTAVAIL:
            return "the host is not an address of this machine";
        default:
            return "the host does not resolve to an address of this machine, or the port is "
                   "taken";
    }
}

void set_text(httplib::Response& res, int status, std::string_view text) {
    res.status = status;
    res.set_content(std::string(text), "text/plain; charset=utf-8");
}

}  // namespace

std::shared_ptr<prometheus_endpoint> prometheus_endpoint::acquire(
    const prometheus_address& address) {
    auto& r = registry();
    const std::string key = address.to_string();
    const std::lock_guard lock(r.mutex);
    if (const auto it = r.by_address.find(key); it != r.by_address.end()) {
        if (auto existing = it->second.lock()) {
            return existing;
        }
    }
    // The deleter stops the server under the registry lock, so an exporter that asks for the
    // same address right after finds the port free again rather than still bound.
    std::shared_ptr<prometheus_endpoint> endpoint(
        new prometheus_endpoint(address), [key](prometheus_endpoint* e) {
            auto& reg = registry();
            const std::lock_guard relock(reg.mutex);
            if (const auto it = reg.by_address.find(key);
                it != reg.by_address.end() && it->second.expired()) {
                reg.by_address.erase(it);
            }
            delete e;
        });
    r.by_address[key] = endpoint;
    return endpoint;
}

prometheus_endpoint::prometheus_endpoint(const prometheus_address& address)
    : server_(std::make_unique<httplib::Server>()), bound_(address) {
    server_->new_task_queue = [] { return new httplib::ThreadPool(worker_threads); };
    // httplib's default options add SO_REUSEPORT, which would let a second process bind the
    // same port and receive half the scrapes; a taken port must be an error.
    server_->set_socket_options([](socket_t sock) {
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    server_->set_keep_alive_timeout(keep_alive_seconds);
    install_routes();

    errno = 0;
    int port = -1;
    if (address.port == 0) {
        port = server_->bind_to_any_port(address.host);
    } else if (server_->bind_to_port(address.host, address.port)) {
        port = address.port;
    }
    if (port < 0) {
        throw exporter_error(fmt::format("cannot listen on {}: {}", address.to_string(),
                                         listen_failure_reason(errno)));
    }
    bound_.port = static_cast<std::uint16_t>(port);

    thread_ = std::thread([this] {
        server_->listen_after_bind();
        listening_done_.store(true);
    });
    // stop() only takes effect once the accept loop runs, so wait for it here.
    const auto deadline = std::chrono::steady_clock::now() + start_timeout;
    while (!server_->is_running() && !listening_done_.load() &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    log(log_level::info,
        address.port == 0
            ? fmt::format("prometheus: serving http://{}/metrics (port {} chosen for {})",
                          bound_.to_string(), bound_.port, address.to_string())
            : fmt::format("prometheus: serving http://{}/metrics", bound_.to_string()));
}

prometheus_endpoint::~prometheus_endpoint() {
    for (int i = 0; i < 5000 && !listening_done_.load(); ++i) {
        server_->stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    thread_.join();
}

void prometheus_endpoint::install_routes() {
    const std::string path(metrics_path);
    server_->Get(path, [this](const httplib::Request&, httplib::Response& res) {
        try {
            res.set_content(render(), std::string(content_type));
        } catch (const std::exception& e) {
            set_text(res, 500, fmt::format("rendering failed: {}\n", e.what()));
        }
    });
    // Everything but GET and HEAD of /metrics is answered here, before httplib reads a body it
    // would have no use for (a bodyless POST would otherwise wait for the read timeout).
    server_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
        // An unread body must not be taken for the next request on this connection.
        const auto length = req.get_header_value("Content-Length");
        if ((!length.empty() && length != "0") || req.has_header("Transfer-Encoding")) {
            res.set_header("Connection", "close");
        }
        const bool metrics = req.path == metrics_path;
        if (metrics && (req.method == "GET" || req.method == "HEAD")) {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        if (metrics) {
            res.set_header("Allow", std::string(allowed));
            set_text(
                res, 405,
                fmt::format("method {} is not allowed on {}; use GET\n", req.method, metrics_path));
        } else {
            set_text(res, 404,
                     fmt::format("{} not found; metrics are at {}\n", req.path, metrics_path));
        }
        return httplib::Server::HandlerResponse::Handled;
    });
    server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
        if (res.body.empty()) {
            set_text(res, res.status, fmt::format("HTTP error {}\n", res.status));
        }
    });
}

bool prometheus_endpoint::attach(std::shared_ptr<const prometheus_agent> agent) {
    const std::lock_guard lock(agents_mutex_);
    const bool taken = std::any_of(agents_.begin(), agents_.end(), [&](const auto& a) {
        return a->agent_name() == agent->agent_name();
    });
    if (taken) {
        return false;
    }
    agents_.push_back(std::move(agent));
    return true;
}

void prometheus_endpoint::detach(const prometheus_agent* agent) noexcept {
    const std::lock_guard lock(agents_mutex_);
    std::erase_if(agents_, [agent](const auto& a) { return a.get() == agent; });
}

std::string prometheus_endpoint::render() const {
    std::vector<std::shared_ptr<const agent_snapshot>> snapshots;
    {
        const std::lock_guard lock(agents_mutex_);
        snapshots.reserve(agents_.size());
        for (const auto& a : agents_) {
            snapshots.push_back(a->snapshot());
        }
    }
    std::sort(snapshots.begin(), snapshots.end(),
              [](const auto& a, const auto& b) { return a->agent_name < b->agent_name; });
    std::string out;
    out.reserve(last_size_.load(std::memory_order_relaxed) + 256);
    detail::render(snapshots, out);
    last_size_.store(out.size(), std::memory_order_relaxed);
    return out;
}

}  // namespace xtel::detail
