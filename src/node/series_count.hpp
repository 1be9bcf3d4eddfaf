#pragma once
/// How many time series an encoded snapshot holds, known before it is decoded (private to
/// src/): the collector refuses a node file whose series would pass the node's cap without
/// spending the memory a decoding takes (several times the payload's size).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace xtel::node::detail {

/// The time series of the encoded snapshot `payload` (docs/node-format.md, "The payload") as
/// Prometheus counts them, one per sample line: a counter's or gauge's series one, a
/// histogram's one per bound plus +Inf, _sum and _count (a histogram with native buckets too:
/// one series in protobuf, but these lines in text, the most it can take), a summary's _sum
/// and _count. Walks the bytes without allocating and stops as soon as the count passes
/// `stop_above` (then returns what it had counted, more than `stop_above`). std::nullopt when
/// the bytes are not a payload of a version decode_snapshot takes that it can walk to the end;
/// decode_snapshot then says what is wrong.
std::optional<std::uint64_t> count_time_series(std::span<const std::byte> payload,
                                               std::uint64_t stop_above);

}  // namespace xtel::node::detail
