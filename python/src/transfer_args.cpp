#include "transfer_args.hpp"

#include <fmt/format.h>
#include <nanobind/nanobind.h>

#include <algorithm>
#include <string>

#include "xtel/core/ascii.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/trace/context.hpp"

namespace xtel::python {

namespace nb = nanobind;

namespace {

/// Raises ValueError: `argument`='value' is invalid, and what is accepted.
[[noreturn]] void refuse(std::string_view argument,
                         std::string_view value,
                         std::string_view accepted) {
    throw nb::value_error(fmt::format("{}='{}' is invalid: expected {}", argument,
                                      parse::escape_controls(value), accepted)
                              .c_str());
}

/// The error kinds a transfer can fail with, by name: every status_code past in_progress.
std::string error_kind_names() {
    std::string out;
    for (std::size_t i = static_cast<std::size_t>(status_code::in_progress) + 1;
         i < status_code_count; ++i) {
        out +=
            fmt::format("{}'{}'", out.empty() ? "" : ", ", to_string(static_cast<status_code>(i)));
    }
    return out;
}

}  // namespace

transfer_op op_of(std::string_view op) {
    if (op == "write") {
        return transfer_op::write;
    }
    if (op == "read") {
        return transfer_op::read;
    }
    refuse("op", op, "'write' or 'read'");
}

ending ending_of(std::string_view status) {
    if (status == "ok") {
        return {};
    }
    if (status == "error") {
        return {transfer_status::error, status_code::ok};
    }
    for (std::size_t i = static_cast<std::size_t>(status_code::in_progress) + 1;
         i < status_code_count; ++i) {
        const auto code = static_cast<status_code>(i);
        if (status == to_string(code)) {
            return {failed_with(code), code};
        }
    }
    refuse("status", status,
           fmt::format("'ok', an error kind ({}) or 'error' (a failure of no known kind)",
                       error_kind_names()));
}

category category_of(std::string_view name) {
    for (std::size_t i = 0; i < category_count; ++i) {
        const auto c = static_cast<category>(i);
        if (ascii::equals_ignoring_case(name, to_string(c))) {
            return c;
        }
    }
    refuse("category", name,
           "one of memory, transfer, connection, backend, error, performance, system, custom "
           "(in any case)");
}

value_kind kind_of(std::string_view kind) {
    if (kind == "sample") {
        return value_kind::sample;
    }
    if (kind == "counter") {
        return value_kind::counter;
    }
    if (kind == "gauge") {
        return value_kind::gauge;
    }
    refuse("kind", kind, "'sample', 'counter' or 'gauge'");
}

std::string_view request_of(const std::string_view* request_id,
                            const std::string_view* traceparent) {
    if (traceparent != nullptr) {
        if (request_id != nullptr) {
            throw nb::value_error(
                "request_id and traceparent are both given: give one (a traceparent is the "
                "request's trace; a request id is hashed into a trace id)");
        }
        if (!trace::parse_traceparent(*traceparent)) {
            refuse("traceparent", *traceparent,
                   "W3C's form 00-<32 hex digits, not all 0>-<16 hex digits, not all 0>-<2 hex "
                   "digits>");
        }
        return *traceparent;
    }
    return request_id != nullptr ? clip_request_id(*request_id) : std::string_view{};
}

std::uint16_t descriptors_of(std::uint64_t n) noexcept {
    return static_cast<std::uint16_t>(std::min<std::uint64_t>(n, 65535));
}

}  // namespace xtel::python
