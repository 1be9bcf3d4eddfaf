// fmt's compiled part, inside the plug-in: NIXL loads libtelemetry_exporter_xtel.so into an
// engine's process, whose image has the C and C++ runtime but seldom Debian's libfmt.so.9, and a
// plug-in whose dlopen fails makes NIXL throw out of nixlAgent's constructor (the engine's worker
// dies: "Failed to load telemetry plugin"). Debian ships fmt as a shared library only, so this
// file compiles the functions xtel's objects take from it in fmt's header-only mode, where they
// are inline: each is named below so that it is emitted here, and the plug-in's version script
// keeps them local. The list is what `nm -D --undefined-only` of the plug-in showed against fmt
// 9; tests/link_test.py --runtime-only fails when the plug-in needs libfmt again.
#define FMT_HEADER_ONLY
#include <fmt/format.h>

#include <cstdint>
#include <string>

#if FMT_VERSION < 90000 || FMT_VERSION >= 100000
#error "fmt_inline.cpp names fmt 9's compiled functions; check the list against this fmt"
#endif

namespace fmt {
inline namespace v9 {
namespace detail {

// Templates fmt's library instantiates for char, and for float and double.
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template char decimal_point_impl<char>(locale_ref);
namespace dragonbox {
template decimal_fp<float> to_decimal<float>(float) noexcept;
template decimal_fp<double> to_decimal<double>(double) noexcept;
}  // namespace dragonbox

}  // namespace detail
}  // namespace v9
}  // namespace fmt

namespace {

// The inline functions, named so that this file emits them.
[[gnu::used]] const void* const emitted[] = {
    reinterpret_cast<const void*>(
        static_cast<std::string (*)(fmt::string_view, fmt::format_args)>(&fmt::vformat)),
    reinterpret_cast<const void*>(&fmt::detail::throw_format_error),
    reinterpret_cast<const void*>(static_cast<bool (*)(std::uint32_t)>(&fmt::detail::is_printable)),
};

// format_error's destructor, vtable and type information.
[[gnu::used]] void emit_format_error() {
    throw fmt::format_error("unused");
}

}  // namespace
