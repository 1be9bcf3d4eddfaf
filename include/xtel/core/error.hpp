#pragma once
/// xtel's exceptions. They are thrown at set-up time only; the record path never throws.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace xtel {

/// Base of every exception xtel throws.
class error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A malformed NIXL_TELEMETRY_* value: the message names the variable, quotes the value and
/// says what is accepted.
class config_error : public error {
  public:
    using error::error;
};

/// An exporter could not be set up (a file, a port, a plugin).
class exporter_error : public error {
  public:
    using error::error;
};

/// What is wrong with a file a reader refuses (the flight recorder's, the node file's).
enum class file_fault : std::uint8_t {
    unreadable,    ///< it could not be opened, stat'ed or read (permissions, I/O)
    not_regular,   ///< a FIFO, a device, a directory (or a link, opened without following)
    too_large,     ///< the file, or what its header names, reaches past the reader's limit
    wrong_format,  ///< shorter than its header; another magic, version or layout
    damaged,       ///< a file of the format whose header names bytes it does not hold
};

/// A file is not one this build can read, or it was damaged while being read; what() is one
/// line naming the file and saying why, kind() which of the faults it is.
class format_error : public error {
  public:
    format_error(file_fault kind, const std::string& what) : error(what), kind_(kind) {}

    file_fault kind() const noexcept { return kind_; }

  private:
    file_fault kind_;
};

/// A command line that cannot be run (xtel-exporter's, xtel top's); what() names the option, the
/// value and what is accepted.
class usage_error : public error {
  public:
    using error::error;
};

}  // namespace xtel
