#pragma once
// Child processes that run alongside a test, the scrape-target workload, and real Prometheus
// servers (scraping, federating, receiving remote writes) to ask, for the Prometheus
// integration tests.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.hpp"

extern char** environ;

namespace prom_it {

inline std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void write_file(const std::filesystem::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

/// Whether loopback port `port` can be bound now (without SO_REUSEADDR, so that a port a
/// closed connection still holds in TIME_WAIT counts as taken).
inline bool port_bindable(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return false;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

/// The first port of the kernel's ephemeral range (ip_local_port_range), from which connect()
/// takes each connection's local port.
inline int ephemeral_low() {
    int low = 32768;  // Linux's default
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
    return low;
}

/// The lowest port free_port() hands out.
inline constexpr int free_port_floor = 10000;

/// A loopback port that was free a moment ago (for programs that cannot be given port 0),
/// chosen at random below the kernel's ephemeral range. A port of that range (what binding port
/// 0 gives) can become the local port of any client's connection, a Prometheus scraping its
/// targets or another test's HTTP client, before the program given it binds it: that is how a
/// test Prometheus once failed to start in CI. Below the range, only another free_port() caller
/// can take it, one chance in some twenty thousand.
inline std::uint16_t free_port() {
    static unsigned seed =
        static_cast<unsigned>(::getpid()) * 2654435761u ^
        static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
    const int low = ephemeral_low();
    if (low > free_port_floor + 1000) {
        for (int attempt = 0; attempt < 200; ++attempt) {
            seed = seed * 1103515245u + 12345u;
            const auto port = static_cast<std::uint16_t>(
                free_port_floor + (seed >> 8) % static_cast<unsigned>(low - free_port_floor));
            if (port_bindable(port)) {
                return port;
            }
        }
    }
    // No room below the range (or all of it taken): any port the kernel gives.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    ::close(fd);
    return ok ? ntohs(a.sin_port) : 0;
}

struct spawn_options {
    std::vector<std::string> argv;
    /// Set in the child's environment on top of this process's.
    std::vector<std::pair<std::string, std::string>> env;
    /// Empty: stdin is a pipe that stays open while the child runs.
    std::filesystem::path stdin_path;
    /// Empty: stdout and stderr go to a pipe that read_line() reads.
    std::filesystem::path output_path;
    /// Left out of the child's environment (unless set in `env`).
    std::vector<std::string> unset;
    /// The child leads a process group of its own (its id is the child's pid), so that what it
    /// starts in the background can be found and stopped with it: kill(-pid, ...).
    bool own_process_group = false;
};

/// A child process, stopped (SIGTERM, then SIGKILL) when this goes.
class child_process {
  public:
    explicit child_process(const spawn_options& o) {
        int in_pipe[2] = {-1, -1};
        int out_pipe[2] = {-1, -1};
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        if (o.stdin_path.empty()) {
            if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
                throw std::runtime_error("pipe failed");
            }
            posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
        } else {
            posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, o.stdin_path.c_str(), O_RDONLY,
                                             0);
        }
        if (o.output_path.empty()) {
            if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
                throw std::runtime_error("pipe failed");
            }
            posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
            posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDERR_FILENO);
        } else {
            posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, o.output_path.c_str(),
                                             O_WRONLY | O_CREAT | O_TRUNC, 0644);
            posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
        }

        std::vector<std::string> env_strings;
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string_view kv(*e);
            const auto name = kv.substr(0, kv.find('='));
            const bool replaced = std::any_of(o.env.begin(), o.env.end(),
                                              [&](const auto& p) { return p.first == name; }) ||
                                  std::find(o.unset.begin(), o.unset.end(), name) != o.unset.end();
            if (!replaced) {
                env_strings.emplace_back(kv);
            }
        }
        for (const auto& [k, v] : o.env) {
            env_strings.push_back(k + "=" + v);
        }
        std::vector<char*> envp;
        for (auto& s : env_strings) {
            envp.push_back(s.data());
        }
        envp.push_back(nullptr);
        std::vector<std::string> args = o.argv;
        std::vector<char*> argv;
        for (auto& a : args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);

        posix_spawnattr_t attributes;
        posix_spawnattr_init(&attributes);
        if (o.own_process_group) {
            posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
            posix_spawnattr_setpgroup(&attributes, 0);
        }
        const int rc =
            ::posix_spawnp(&pid_, argv[0], &actions, &attributes, argv.data(), envp.data());
        posix_spawnattr_destroy(&attributes);
        posix_spawn_file_actions_destroy(&actions);
        if (in_pipe[0] >= 0) {
            ::close(in_pipe[0]);
            stdin_fd_ = in_pipe[1];
        }
        if (out_pipe[1] >= 0) {
            ::close(out_pipe[1]);
            out_fd_ = out_pipe[0];
        }
        if (rc != 0) {
            pid_ = -1;
            throw std::runtime_error("cannot start " + o.argv[0] + ": " + std::strerror(rc));
        }
    }

    ~child_process() {
        stop();
        for (const int fd : {stdin_fd_, out_fd_}) {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    }

    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    /// Reads output lines until one contains `part`, the output ends, or `timeout` passes.
    /// Everything read is kept in output().
    std::optional<std::string> read_line(std::string_view part, std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (out_fd_ >= 0) {
            for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
                std::string line = pending_.substr(0, nl);
                pending_.erase(0, nl + 1);
                if (line.find(part) != std::string::npos) {
                    return line;
                }
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                return std::nullopt;
            }
            pollfd p{out_fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
                continue;
            }
            char buf[4096];
            const auto n = ::read(out_fd_, buf, sizeof buf);
            if (n <= 0) {
                return std::nullopt;
            }
            pending_.append(buf, static_cast<std::size_t>(n));
            output_.append(buf, static_cast<std::size_t>(n));
        }
        return std::nullopt;
    }

    const std::string& output() const noexcept { return output_; }

    /// The child's process id; -1 once it has been reaped.
    pid_t pid() const noexcept { return pid_; }

    /// The exit status if the child has ended (it is reaped), else nullopt.
    std::optional<int> exited() {
        if (pid_ < 0) {
            return status_;
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        return pid_ < 0 ? status_ : std::nullopt;
    }

    /// Waits up to `timeout` for the child to end on its own.
    std::optional<int> wait(std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!exited() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return exited();
    }

    void stop() {
        if (exited()) {
            return;
        }
        ::kill(pid_, SIGTERM);
        if (!wait(std::chrono::seconds(10))) {
            ::kill(pid_, SIGKILL);
            wait(std::chrono::seconds(10));
        }
    }

  private:
    pid_t pid_ = -1;
    std::optional<int> status_;
    int stdin_fd_ = -1;
    int out_fd_ = -1;
    std::string pending_;
    std::string output_;
};

/// xfer_demo with the Prometheus exporter on: two agents in one process move a known number of
/// bytes, verify them, then keep their endpoint up (--linger) until stopped.
struct workload {
    std::vector<std::string> argv;
    std::string agent_name;  ///< the initiator, whose agent_tx_bytes_total the test checks
    std::uint64_t tx_bytes = 0;
};

inline workload transfer_workload(std::string agent, std::uint64_t transfers, std::uint64_t block) {
    return {{XTEL_XFER_DEMO, "--op", "write", "--total", std::to_string(transfers * block),
             "--block", std::to_string(block), "--initiator-name", agent, "--target-name",
             agent + "_target", "--linger", "120"},
            agent,
            transfers * block};
}

/// Starts `w` with the Prometheus exporter on a loopback port the system chooses.
inline child_process start_workload(const workload& w) {
    spawn_options o;
    o.argv = w.argv;
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_METRIC_SET", "both"},
             {"NIXL_TELEMETRY_EXPORTER", "prometheus"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", "127.0.0.1:0"},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"},
             {"XTEL_LOG_LEVEL", "info"}};
    return child_process(o);
}

/// The host:port out of xtel's "serving http://host:port/metrics" log line; empty if absent.
inline std::string served_address(const std::string& line) {
    constexpr std::string_view prefix = "serving http://";
    const auto begin = line.find(prefix);
    if (begin == std::string::npos) {
        return {};
    }
    const auto start = begin + prefix.size();
    const auto end = line.find("/metrics", start);
    return end == std::string::npos ? std::string() : line.substr(start, end - start);
}

/// The port of the "serving http://HOST:PORT/metrics" line `p` writes within `timeout` (xtel's
/// agents and xtel-exporter write one when they listen); 0 when none came.
inline int served_port(child_process& p,
                       std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto line = p.read_line("serving http://", timeout);
    const auto address = line ? served_address(*line) : std::string();
    return address.empty() ? 0 : std::stoi(address.substr(address.rfind(':') + 1));
}

/// The body of GET /metrics on a loopback port; empty when it did not answer 200.
inline std::string scrape(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10);
    const auto res = c.Get("/metrics");
    return res && res->status == 200 ? res->body : std::string();
}

/// Scrapes a loopback port until `done(body)` holds or `timeout` passes; the last body.
template <class Done>
std::string scrape_until(int port,
                         Done&& done,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string body = scrape(port);
    while (!done(body) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        body = scrape(port);
    }
    return body;
}

/// The value of the first line of an exposition `body` that starts with `prefix`.
inline std::optional<std::string> value_of(const std::string& body, std::string_view prefix) {
    for (std::size_t at = 0; at < body.size();) {
        const auto nl = body.find('\n', at);
        const std::string_view line(body.data() + at,
                                    (nl == std::string::npos ? body.size() : nl) - at);
        if (line.starts_with(prefix)) {
            return std::string(line.substr(line.rfind(' ') + 1));
        }
        at = nl == std::string::npos ? body.size() : nl + 1;
    }
    return std::nullopt;
}

/// The sum of the values of the lines of an exposition `body` that start with `prefix`: of a
/// family's series whatever their labels (`name{`); 0 when there is none.
inline double sum_of(const std::string& body, std::string_view prefix) {
    double sum = 0;
    for (std::size_t at = 0; at < body.size();) {
        const auto nl = body.find('\n', at);
        const std::string_view line(body.data() + at,
                                    (nl == std::string::npos ? body.size() : nl) - at);
        if (line.starts_with(prefix)) {
            sum += std::stod(std::string(line.substr(line.rfind(' ') + 1)));
        }
        at = nl == std::string::npos ? body.size() : nl + 1;
    }
    return sum;
}

/// `s` as a URL query value.
inline std::string percent_encode(std::string_view s) {
    std::string out;
    for (const unsigned char c : s) {
        if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

/// The sample value of the first series in a /api/v1/query answer; empty when there is none.
inline std::string first_value(const std::string& json) {
    const auto at = json.find("\"value\":[");
    if (at == std::string::npos) {
        return {};
    }
    const auto open = json.find('"', json.find(',', at));
    const auto close = json.find('"', open + 1);
    return open == std::string::npos || close == std::string::npos
               ? std::string()
               : json.substr(open + 1, close - open - 1);
}

/// One scrape job of a test Prometheus, every second. With `match`, a federation job: it asks
/// each target's /federate for the series these selectors match and keeps the labels the
/// federated server gave them (honor_labels), as a global Prometheus does.
struct scrape_job {
    std::string name{};
    std::vector<std::string> targets{};  ///< host:port each
    std::vector<std::string> match{};    ///< the match[] selectors; empty: scrape /metrics
};

struct prometheus_options {
    std::vector<scrape_job> jobs{};
    /// Takes remote writes at /api/v1/write (--web.enable-remote-write-receiver).
    bool remote_write_receiver = false;
    std::vector<std::string> flags{};  ///< added to the command line
    /// 0: a loopback port that is free now, and another if that one is taken before the
    /// server binds it.
    std::uint16_t port = 0;
    /// With `port` given: start on another free port if that one is taken.
    bool move_if_taken = false;
    /// Rule files it loads, evaluated every second.
    std::vector<std::filesystem::path> rule_files{};
};

/// A real Prometheus server (the Debian package's) on a loopback port; its configuration, log
/// and data in a directory of its own. Stopped when this goes.
class prometheus_server {
  public:
    prometheus_server(const std::filesystem::path& dir, const prometheus_options& o)
        : port(o.port != 0 ? o.port : free_port()), log(dir / "prometheus.log") {
        std::filesystem::create_directories(dir);
        config_file_ = dir / "prometheus.yml";
        std::string config =
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"
            "  evaluation_interval: 1s\n";
        if (!o.rule_files.empty()) {
            config += "rule_files:\n";
            for (const auto& f : o.rule_files) {
                config += fmt::format("  - '{}'\n", f.string());
            }
        }
        config += "scrape_configs:";
        config += o.jobs.empty() ? " []\n" : "\n";
        for (const auto& job : o.jobs) {
            config += fmt::format("  - job_name: '{}'\n", job.name);
            if (!job.match.empty()) {
                config += "    honor_labels: true\n    metrics_path: /federate\n";
                config += "    params:\n      'match[]':\n";
                for (const auto& m : job.match) {
                    config += fmt::format("        - '{}'\n", m);
                }
            }
            config += "    static_configs:\n      - targets:\n";
            for (const auto& t : job.targets) {
                config += fmt::format("          - '{}'\n", t);
            }
        }
        write_file(dir / "prometheus.yml", config);
        std::vector<std::string> argv = {
            XTEL_PROMETHEUS, "--config.file=" + (dir / "prometheus.yml").string(),
            "--storage.tsdb.path=" + (dir / "data").string(),
            fmt::format("--web.listen-address={}", address()), "--log.level=warn"};
        if (o.remote_write_receiver) {
            argv.emplace_back("--web.enable-remote-write-receiver");
        }
        argv.insert(argv.end(), o.flags.begin(), o.flags.end());
        const bool may_move = o.port == 0 || o.move_if_taken;
        for (int attempt = 0;; ++attempt) {
            argv[3] = fmt::format("--web.listen-address={}", address());
            server.emplace(spawn_options{argv, {}, {}, log});
            if (!wait_until_serving() && may_move && attempt < 4 &&
                read_file(log).find("address already in use") != std::string::npos) {
                port = free_port();
                continue;
            }
            break;
        }
    }

    /// Scraping `target` (host:port) alone, as job `xtel`.
    prometheus_server(const std::filesystem::path& dir,
                      const std::string& target,
                      std::vector<std::string> flags = {})
        : prometheus_server(dir,
                            prometheus_options{.jobs = {{.name = "xtel", .targets = {target}}},
                                               .flags = std::move(flags)}) {}

    /// host:port of its web API (and /federate).
    std::string address() const { return fmt::format("127.0.0.1:{}", port); }

    /// Where a remote writer sends to it.
    std::string write_url() const { return fmt::format("http://{}/api/v1/write", address()); }

    /// Asks `path` until `done(body)` or `timeout` passes (or the server ends); the last body.
    template <class Done>
    std::string poll(const std::string& path,
                     Done&& done,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
        httplib::Client api("127.0.0.1", port);
        api.set_connection_timeout(1);
        api.set_read_timeout(5);
        std::string last;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline && !server->exited()) {
            if (const auto res = api.Get(path); res && res->status == 200) {
                last = res->body;
                if (done(last)) {
                    break;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        return last;
    }

    /// Whether this server answers on its port, waiting up to 30 s for it; false once it has
    /// ended (as it does at once when its port is taken). Its answer to /api/v1/status/flags
    /// names its configuration file, so that another server on the same port is not taken for
    /// it.
    bool wait_until_serving() {
        httplib::Client api("127.0.0.1", port);
        api.set_connection_timeout(1);
        api.set_read_timeout(5);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < deadline) {
            if (server->exited()) {
                return false;
            }
            if (const auto res = api.Get("/api/v1/status/flags");
                res && res->status == 200 &&
                res->body.find(config_file_.string()) != std::string::npos) {
                return !server->exited();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    /// The value of the first series the instant query `promql` answers, asked until it is
    /// `expected` or `timeout` passes; the last value (empty: no series).
    std::string value_until(std::string_view promql,
                            std::string_view expected,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
        return first_value(poll(
            "/api/v1/query?query=" + percent_encode(promql),
            [&](const std::string& body) { return first_value(body) == expected; }, timeout));
    }

    /// The value of the first series the instant query `promql` answers now; empty: none.
    std::string value(std::string_view promql) {
        return first_value(poll("/api/v1/query?query=" + percent_encode(promql),
                                [](const std::string&) { return true; }));
    }

    std::uint16_t port;
    std::filesystem::path log;
    std::optional<child_process> server;

  private:
    std::filesystem::path config_file_;
};

}  // namespace prom_it
