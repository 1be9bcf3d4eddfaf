#pragma once
/// xtel's exceptions. They are thrown at set-up time only; the record path never throws.

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

}  // namespace xtel
