#pragma once
/// What an agent operation returns: a code and, for an error, a message that names the bad
/// value and what would be accepted. Agent operations report errors this way, never by throwing.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "xtel/core/error.hpp"

namespace xtel {

/// The outcome kinds. Each error kind has its own ERROR event (names.hpp).
enum class status_code : std::uint8_t {
    ok = 0,
    in_progress = 1,          ///< a transfer was posted and has not completed yet
    invalid_argument = 2,     ///< a descriptor, handle or size that cannot be right
    not_found = 3,            ///< memory not registered, or a remote agent not loaded
    busy = 4,                 ///< in use: a transfer in progress, memory used by a transfer
    not_supported = 5,        ///< e.g. GPU memory without CUDA or without a device
    bad_metadata = 6,         ///< a metadata blob that is malformed or from another format
    remote_disconnected = 7,  ///< the remote agent went away or was disconnected
    timed_out = 8,            ///< a transfer did not complete within the agent's deadline
    backend_error = 9,        ///< UCX refused an operation
};

inline constexpr std::size_t status_code_count = 10;

/// Lower-case name of the code ("remote_disconnected"); "unknown" out of range.
constexpr std::string_view to_string(status_code c) noexcept {
    constexpr std::string_view names[status_code_count] = {
        "ok",        "in_progress",   "invalid_argument", "not_found",
        "busy",      "not_supported", "bad_metadata",     "remote_disconnected",
        "timed_out", "backend_error"};
    const auto i = static_cast<std::size_t>(c);
    return i < status_code_count ? names[i] : std::string_view{"unknown"};
}

class [[nodiscard]] status {
  public:
    /// ok.
    status() noexcept = default;
    status(status_code code, std::string message) noexcept
        : code_(code), message_(std::move(message)) {}

    static status in_progress() noexcept { return status(status_code::in_progress); }

    bool ok() const noexcept { return code_ == status_code::ok; }
    /// Neither ok nor in progress.
    bool is_error() const noexcept { return code_ > status_code::in_progress; }
    status_code code() const noexcept { return code_; }
    const std::string& message() const noexcept { return message_; }
    /// "code: message", or just the code when there is no message.
    std::string to_string() const {
        std::string s(xtel::to_string(code_));
        if (!message_.empty()) {
            s += ": ";
            s += message_;
        }
        return s;
    }

  private:
    explicit status(status_code code) noexcept : code_(code) {}

    status_code code_ = status_code::ok;
    std::string message_;
};

/// An agent could not be set up (UCX would not start, the name is unusable, ...).
class agent_error : public error {
  public:
    using error::error;
};

}  // namespace xtel
