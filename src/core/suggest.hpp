#pragma once
/// The library's keyword matching; "did you mean" is public (xtel/core/suggest.hpp), for the
/// tools' messages too.

#include <string_view>

#include "xtel/core/suggest.hpp"

namespace xtel::detail {

/// True when `a` and `b` are the same ignoring ASCII case: the rule for every keyword xtel
/// defines (booleans, log levels, built-in exporter names); the comparison is
/// ascii::equals_ignoring_case, named here for what it decides.
bool same_keyword(std::string_view a, std::string_view b) noexcept;

}  // namespace xtel::detail
