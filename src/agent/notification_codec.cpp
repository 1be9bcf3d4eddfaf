// The notification's wire format (docs/notifications.md): little-endian, a fixed header and two
// strings. The decoder takes bytes from any process that can reach this agent's UCX worker, so
// every length is checked against what is left before it is used, and a message has exactly
// one encoding (unused fields zero, no trailing bytes): what it accepts it can write again.

#include "agent/notification_codec.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "xtel/trace/context.hpp"

namespace xtel::detail {

namespace {

constexpr std::byte magic0{'x'};
constexpr std::byte magic1{'n'};

enum flag : std::uint8_t {
    follows_transfer = 1,  ///< op, descriptors and bytes describe the transfer it follows
    has_trace = 2,         ///< trace id (non-zero) and span id are the transfer's
};
constexpr std::uint8_t known_flags = follows_transfer | has_trace;

template <class T>
void put(std::vector<std::byte>& out, T v) {
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        out.push_back(static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
    }
}

template <class T>
T get(std::span<const std::byte> in, std::size_t at) noexcept {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        v |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
    }
    return static_cast<T>(v);
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& a) noexcept {
    return std::all_of(a.begin(), a.end(), [](std::uint8_t b) { return b == 0; });
}

}  // namespace

void encode_notification(const notification& n, std::vector<std::byte>& out) {
    const bool traced = n.traced && !all_zero(n.trace_id);
    std::uint8_t flags = 0;
    if (n.transfer) {
        flags |= follows_transfer;
    }
    if (traced) {
        flags |= has_trace;
    }
    out.reserve(out.size() + notification_header_v1 + n.remote_agent.size() + n.message.size());
    out.push_back(magic0);
    out.push_back(magic1);
    put<std::uint8_t>(out, notification_version);
    put<std::uint8_t>(out, flags);
    put<std::uint8_t>(out, n.transfer ? static_cast<std::uint8_t>(n.op) : 0);
    put<std::uint8_t>(out, notification_header_v1);
    put<std::uint16_t>(out, static_cast<std::uint16_t>(n.remote_agent.size()));
    put<std::uint32_t>(out, static_cast<std::uint32_t>(n.message.size()));
    put<std::uint32_t>(out, n.transfer ? n.descriptors : 0);
    put<std::uint64_t>(out, n.transfer ? n.bytes : 0);
    for (std::size_t i = 0; i < 16; ++i) {
        out.push_back(static_cast<std::byte>(traced ? n.trace_id[i] : 0));
    }
    for (std::size_t i = 0; i < 8; ++i) {
        out.push_back(static_cast<std::byte>(traced ? n.span_id[i] : 0));
    }
    const auto* s = reinterpret_cast<const std::byte*>(n.remote_agent.data());
    out.insert(out.end(), s, s + n.remote_agent.size());
    const auto* m = reinterpret_cast<const std::byte*>(n.message.data());
    out.insert(out.end(), m, m + n.message.size());
}

std::string_view decode_notification(std::span<const std::byte> in, notification& out) {
    if (in.size() < notification_header_v1) {
        return "shorter than the 48-byte header";
    }
    if (in[0] != magic0 || in[1] != magic1) {
        return "not a notification (no 'xn' magic)";
    }
    if (get<std::uint8_t>(in, 2) != notification_version) {
        return "a version this agent does not read (it reads 1)";
    }
    const auto flags = get<std::uint8_t>(in, 3);
    if ((flags & ~known_flags) != 0) {
        return "unknown flags";
    }
    const auto op = get<std::uint8_t>(in, 4);
    const std::size_t header = get<std::uint8_t>(in, 5);
    const std::size_t sender = get<std::uint16_t>(in, 6);
    const std::size_t message = get<std::uint32_t>(in, 8);
    if (header < notification_header_v1) {
        return "a header length under 48 bytes";
    }
    if (sender == 0 || sender > max_notification_sender) {
        return "a sender name of 0 or more than 255 bytes";
    }
    if (message > max_notification) {
        return "a message longer than 4096 bytes";
    }
    // Each size is bounded above, so the sum cannot wrap.
    if (in.size() != header + sender + message) {
        return "a length that does not match its header";
    }
    out.transfer = (flags & follows_transfer) != 0;
    out.traced = (flags & has_trace) != 0;
    out.descriptors = get<std::uint32_t>(in, 12);
    out.bytes = get<std::uint64_t>(in, 16);
    if (!out.transfer && (op != 0 || out.descriptors != 0 || out.bytes != 0)) {
        return "transfer fields set on a notification that follows no transfer";
    }
    if (op > static_cast<std::uint8_t>(transfer_op::write)) {
        return "an unknown transfer operation";
    }
    out.op = static_cast<transfer_op>(op);
    for (std::size_t i = 0; i < 16; ++i) {
        out.trace_id[i] = get<std::uint8_t>(in, 24 + i);
    }
    for (std::size_t i = 0; i < 8; ++i) {
        out.span_id[i] = get<std::uint8_t>(in, 40 + i);
    }
    if (out.traced == all_zero(out.trace_id) || (!out.traced && !all_zero(out.span_id))) {
        return "a trace context that contradicts its flag";
    }
    const auto* text = reinterpret_cast<const char*>(in.data());
    out.remote_agent.assign(text + header, sender);
    out.message.assign(text + header + sender, message);
    return {};
}

void set_trace(notification& n, std::string_view request_id) noexcept {
    const std::optional<trace::context> ctx = trace::context_of(request_id);
    n.traced = ctx.has_value();
    n.trace_id = ctx ? ctx->trace : trace::trace_id{};
    n.span_id = ctx ? ctx->parent : trace::span_id{};
}

}  // namespace xtel::detail
