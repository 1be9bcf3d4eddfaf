#pragma once
/// The encoded snapshot's layout as both halves of the codec see it (private to src/metrics/):
/// the magic it starts with, and the fewest bytes each element takes, which follow from what
/// encode_snapshot writes (docs/node-format.md) and change with it.

#include <cstddef>

namespace xtel::metrics::detail::codec {

inline constexpr std::byte magic[4] = {std::byte{'X'}, std::byte{'S'}, std::byte{'N'},
                                       std::byte{'P'}};

// The fewest bytes each element can take, so that a count is checked against the bytes left
// before anything is reserved for it: a count of n claims at least n times these.
inline constexpr std::size_t min_string = 4;
inline constexpr std::size_t min_label = 2 * min_string;
// 3 strings, 3 bytes, 3 counts.
inline constexpr std::size_t min_family = 3 * min_string + 3 + 3 * 4;
// A label count, 3 values, 2 counts.
inline constexpr std::size_t min_series = 4 + 3 * 8 + 2 * 4;
inline constexpr std::size_t min_exemplar_v1 = 2 * min_string + 2 * 8;
// And the trace and span ids.
inline constexpr std::size_t min_exemplar = min_exemplar_v1 + 16 + 8;

}  // namespace xtel::metrics::detail::codec
