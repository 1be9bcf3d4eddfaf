#pragma once
// Helpers for the plugin tests: a temporary directory, environment variables set for one scope,
// captured log lines, and the message of an expected exporter_error.

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "xtel/error.hpp"
#include "xtel/log.hpp"

namespace xtel::test {

/// A fresh directory under the system's temporary directory, removed with its contents.
class temp_dir {
  public:
    temp_dir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "xtel-plugin-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed for " + pattern);
        }
        path_ = pattern;
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    const std::filesystem::path& path() const noexcept { return path_; }

  private:
    std::filesystem::path path_;
};

/// Sets (or, with std::nullopt, unsets) a variable, and restores the old value on scope exit.
class scoped_env {
  public:
    scoped_env(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
        if (const char* old = ::getenv(name_.c_str())) {
            old_ = old;
        }
        set(value);
    }
    ~scoped_env() { set(old_); }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

  private:
    void set(const std::optional<std::string>& value) {
        if (value) {
            ::setenv(name_.c_str(), value->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }

    std::string name_;
    std::optional<std::string> old_;
};

/// Collects xtel's log lines (from any thread) until destroyed, then restores the stderr sink.
class log_capture {
  public:
    log_capture() {
        set_log_sink([this](log_level level, std::string_view message) {
            const std::lock_guard lock(mutex_);
            lines_.emplace_back(level, std::string(message));
        });
    }
    ~log_capture() { set_log_sink({}); }
    log_capture(const log_capture&) = delete;
    log_capture& operator=(const log_capture&) = delete;

    /// The messages logged at `level`, in order.
    std::vector<std::string> at(log_level level) const {
        const std::lock_guard lock(mutex_);
        std::vector<std::string> out;
        for (const auto& [l, m] : lines_) {
            if (l == level) {
                out.push_back(m);
            }
        }
        return out;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<std::pair<log_level, std::string>> lines_;
};

/// The message of the exporter_error that `f` throws; fails the test if it throws nothing or
/// something else.
template <class F>
std::string exporter_error_of(F&& f) {
    try {
        f();
    } catch (const exporter_error& e) {
        return e.what();
    }
    FAIL("expected an xtel::exporter_error");
    return {};
}

inline std::vector<std::string> read_lines(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

inline void write_file(const std::filesystem::path& file, std::string_view text) {
    std::ofstream(file, std::ios::binary) << text;
}

}  // namespace xtel::test
