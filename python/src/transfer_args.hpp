#pragma once
// The record calls' arguments as Python gives them (strings), read into the library's own
// types; a value that is none of those accepted raises ValueError naming the argument, the value
// and what is accepted. Each is a few comparisons of short strings: no allocation on the way
// that succeeds, so that a record call allocates nothing.

#include <cstdint>
#include <string_view>

#include "xtel/core/event.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/transfer.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel::python {

/// "write" or "read".
transfer_op op_of(std::string_view op);

/// How a transfer ended, and the error kind of a failure ("ok" for success, an error kind's
/// name, "error" for a failure of no known kind).
struct ending {
    transfer_status status = transfer_status::success;
    /// The kind the ERROR event counts (ok for success and for "error").
    status_code code = status_code::ok;
};
ending ending_of(std::string_view status);

/// A category's name ("transfer", "TRANSFER": matched ignoring case).
category category_of(std::string_view name);

/// "sample", "counter" or "gauge".
value_kind kind_of(std::string_view kind);

/// The request id a record stages: the traceparent when given (checked: W3C's form), else the
/// request id, else none. Both given is refused: which one the span joins would be a guess.
std::string_view request_of(const std::string_view* request_id,
                            const std::string_view* traceparent);

/// A descriptor count as a transfer's shape keeps it (more reads 65535).
std::uint16_t descriptors_of(std::uint64_t n) noexcept;

}  // namespace xtel::python
