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

/// Sets `n`'s trace from the request id its transfer was tagged with, by the spans' rules
/// (trace::context_of, docs/trace-format.md): a traceparent's trace and span, a trace id, or
/// the trace derived from any other id, so that the target joins the trace its initiator's
/// span is in. An untagged transfer (empty id) leaves `n` untraced.
void set_trace(notification& n, std::string_view request_id) noexcept;

}  // namespace xtel::detail
