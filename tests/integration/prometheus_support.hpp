#pragma once
// Child processes that run alongside a test, and the scrape-target workload, for the
// Prometheus integration tests.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
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

/// A loopback port that was free a moment ago (for programs that cannot be given port 0).
inline std::uint16_t free_port() {
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

        const int rc = ::posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
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

}  // namespace prom_it
