#pragma once
// Helpers shared by the tests: temporary directories, environment scopes, running programs.

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/core/config.hpp"
#include "xtel/core/log.hpp"

namespace xtel_test {

/// An environment of its own for config and settings parsers: the variables in `vars`, no
/// others.
inline xtel::env_lookup env_table(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
        if (const auto it = vars.find(std::string(name)); it != vars.end()) {
            return it->second;
        }
        return std::nullopt;
    };
}

/// A configuration with telemetry on, these exporters and this output path, as from_env would
/// make it, for settings parsers.
inline xtel::config enabled_config(std::vector<std::string> exporters,
                                   std::string output_path = {}) {
    xtel::config cfg;
    cfg.enabled = true;
    cfg.exporters = std::move(exporters);
    cfg.output_path = std::move(output_path);
    return cfg;
}

/// A fresh directory under TMPDIR (or /tmp), removed with everything in it.
class temp_dir {
  public:
    temp_dir() {
        auto base = std::filesystem::temp_directory_path() / "xtel-test-XXXXXX";
        std::string tmpl = base.string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path_ = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

/// Sets (or unsets) an environment variable for the life of the scope.
class scoped_env {
  public:
    scoped_env(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
        if (const char* old = ::getenv(name_.c_str())) {
            old_ = old;
        }
        if (value) {
            ::setenv(name_.c_str(), value->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }
    ~scoped_env() {
        if (old_) {
            ::setenv(name_.c_str(), old_->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

  private:
    std::string name_;
    std::optional<std::string> old_;
};

/// The NIXL_TELEMETRY_* variables a program under test reads, set (or unset) as the test
/// gives them for the life of the scope; the caller's are put back.
struct telemetry_env {
    scoped_env enable;
    scoped_env exporter;
    scoped_env output_path;
    scoped_env buffer_size;
};

/// Collects xtel's log lines (from any thread) until destroyed, then restores the stderr sink.
class log_capture {
  public:
    log_capture() {
        xtel::set_log_sink([this](xtel::log_level level, std::string_view message) {
            const std::lock_guard lock(mutex_);
            lines_.emplace_back(level, std::string(message));
        });
    }
    ~log_capture() { xtel::set_log_sink({}); }
    log_capture(const log_capture&) = delete;
    log_capture& operator=(const log_capture&) = delete;

    /// The messages logged at `level`, in order.
    std::vector<std::string> at(xtel::log_level level) const {
        const std::lock_guard lock(mutex_);
        std::vector<std::string> out;
        for (const auto& [l, m] : lines_) {
            if (l == level) {
                out.push_back(m);
            }
        }
        return out;
    }

    /// Every message, in order.
    std::vector<std::string> all() const {
        const std::lock_guard lock(mutex_);
        std::vector<std::string> out;
        for (const auto& line : lines_) {
            out.push_back(line.second);
        }
        return out;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<std::pair<xtel::log_level, std::string>> lines_;
};

struct run_result {
    int exit_code = -1;
    std::string out;  ///< standard output
    std::string err;  ///< standard error
};

/// The whole content of a file; empty when it cannot be read.
inline std::string read_file(const std::filesystem::path& p) {
    std::string s;
    if (FILE* f = std::fopen(p.c_str(), "rb")) {
        std::array<char, 65536> buf;
        size_t n;
        while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
            s.append(buf.data(), n);
        }
        std::fclose(f);
    }
    return s;
}

/// Starts a program (no shell) with its standard output and error going to the files given;
/// returns its pid for the caller to wait for.
inline pid_t spawn(const std::vector<std::string>& argv,
                   const std::filesystem::path& out_path,
                   const std::filesystem::path& err_path) {
    const pid_t pid = ::fork();
    if (pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        if (!std::freopen(out_path.c_str(), "w", stdout) ||
            !std::freopen(err_path.c_str(), "w", stderr)) {
            ::_exit(126);
        }
        std::vector<char*> args;
        for (const auto& a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    return pid;
}

/// Runs a program (no shell) and collects its output and exit status.
inline run_result run(const std::vector<std::string>& argv) {
    temp_dir d;
    const auto out_path = d / "out";
    const auto err_path = d / "err";
    const pid_t pid = spawn(argv, out_path, err_path);
    int status = 0;
    ::waitpid(pid, &status, 0);
    run_result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out_path);
    r.err = read_file(err_path);
    return r;
}

/// How many times `part` occurs in `text` (overlapping ones included): log lines, series.
inline std::size_t count_of(std::string_view text, std::string_view part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) {
        ++n;
    }
    return n;
}

}  // namespace xtel_test
