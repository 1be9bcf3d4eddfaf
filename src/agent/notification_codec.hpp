#pragma once
/// The wire format of a notification (docs/notifications.md): what one agent's active message
/// carries to another, encoded by the sender and decoded, as input from outside, by the
/// receiver. Private to the agent; the fuzz target and the unit tests reach it from src/.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "xtel/agent/agent.hpp"

namespace xtel::detail {

/// The format's version this build writes, and the only one it reads.
inline constexpr std::uint8_t notification_version = 1;
/// Bytes of the fixed header version 1 writes; a reader skips header bytes past the fields it
/// knows, so a later version can add fields to the header without breaking it.
inline constexpr std::size_t notification_header_v1 = 48;
/// The longest sender name the format carries (agent names are file names: 255 bytes).
inline constexpr std::size_t max_notification_sender = 255;

/// `n` (its remote_agent is the sender's name) as one message: appended to `out`. PRECONDITION:
/// n.message.size() <= max_notification and 1 <= n.remote_agent.size() <=
/// max_notification_sender (the agent checks both before it encodes).
void encode_notification(const notification& n, std::vector<std::byte>& out);

/// Decodes one message into `out`; on failure returns why (a constant string) and leaves `out`
/// in an unspecified state, otherwise returns an empty view. Never throws on any input but
/// std::bad_alloc, and reads no byte outside `in`.
std::string_view decode_notification(std::span<const std::byte> in, notification& out);

/// The trace id and span id of a W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>"), or of a bare
/// trace id (32 hex digits; span id zero); false, and both untouched, for anything else or an
/// all-zero trace id.
bool parse_trace_context(std::string_view id,
                         std::array<std::uint8_t, 16>& trace_id,
                         std::array<std::uint8_t, 8>& span_id) noexcept;

}  // namespace xtel::detail
