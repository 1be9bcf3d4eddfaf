#pragma once
/// The version of this xtel, as CMake's project() names it: what every program prints for
/// --version and xtel_build_info serves. One place: the project's VERSION in CMakeLists.txt.

#include <string_view>

namespace xtel {

/// "0.1.0".
std::string_view version() noexcept;

}  // namespace xtel
