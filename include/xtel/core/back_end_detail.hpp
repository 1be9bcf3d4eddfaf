#pragma once
/// What the back end (back_end.hpp) is built from that is not the back end: finding the one
/// metric model and span stage the exporters declare, and the out-of-line failure report.

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace xtel::detail {

/// Out of line: formats and logs an exporter's failure (the first one per exporter).
void report_export_failure(std::string_view agent,
                           std::string_view exporter_name,
                           std::string_view what,
                           std::uint64_t failures) noexcept;

/// The first of `M...` that is not void (the metric model or span stage some exporter
/// declares), else void.
template <class... M>
struct first_declared {
    using type = void;
};
template <class M, class... Rest>
struct first_declared<M, Rest...> {
    using type = std::conditional_t<std::is_void_v<M>, typename first_declared<Rest...>::type, M>;
};

/// What a back end without a metric model or span stage holds in its place.
struct none_declared {};

}  // namespace xtel::detail
