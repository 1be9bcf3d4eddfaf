#pragma once
/// The cache line size xtel lays its shared data out by: a record that never straddles two
/// lines, a counter on a line of its own.

#include <cstddef>

namespace xtel::detail {

/// 64 bytes on the x86-64 and AArch64 machines xtel runs on. Not
/// std::hardware_destructive_interference_size: its value may differ between compilers and
/// flags, and the staged record's layout must not.
inline constexpr std::size_t cache_line = 64;

}  // namespace xtel::detail
