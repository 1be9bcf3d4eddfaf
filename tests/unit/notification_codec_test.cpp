// The notification's wire format (docs/notifications.md): what the encoder writes, byte by byte,
// and what the decoder refuses, since its input comes from any process that reaches the agent.

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "agent/notification_codec.hpp"
#include "xtel/trace/context.hpp"

namespace notification_codec_test {

using xtel::notification;
using xtel::detail::decode_notification;
using xtel::detail::encode_notification;
using xtel::detail::set_trace;

namespace {

notification transfer_notification() {
    notification n;
    n.remote_agent = "prefill-0";
    n.message = "blocks 3,4";
    n.transfer = true;
    n.op = xtel::transfer_op::read;
    n.descriptors = 2;
    n.bytes = 0x0102030405060708ull;
    set_trace(n, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    REQUIRE(n.traced);
    return n;
}

std::vector<std::byte> encoded(const notification& n) {
    std::vector<std::byte> out;
    encode_notification(n, out);
    return out;
}

std::string decode_error(const std::vector<std::byte>& wire) {
    notification n;
    return std::string(decode_notification(wire, n));
}

}  // namespace

TEST_CASE("a transfer's notification decodes to every field it was encoded with",
          "[notification]") {
    const notification in = transfer_notification();
    notification out;
    REQUIRE(decode_notification(encoded(in), out).empty());
    CHECK(out.remote_agent == "prefill-0");
    CHECK(out.message == "blocks 3,4");
    CHECK(out.transfer);
    CHECK(out.op == xtel::transfer_op::read);
    CHECK(out.descriptors == 2);
    CHECK(out.bytes == 0x0102030405060708ull);
    CHECK(out.traced);
    CHECK(out.trace_id == in.trace_id);
    CHECK(out.span_id == in.span_id);
    CHECK(out.trace_id[0] == 0x4b);
    CHECK(out.span_id[7] == 0xb7);
}

TEST_CASE("the header is 48 little-endian bytes before the sender and the message",
          "[notification]") {
    const auto w = encoded(transfer_notification());
    REQUIRE(w.size() == 48 + 9 + 10);
    CHECK(w[0] == std::byte{'x'});
    CHECK(w[1] == std::byte{'n'});
    CHECK(w[2] == std::byte{1});      // version
    CHECK(w[3] == std::byte{3});      // follows a transfer, traced
    CHECK(w[4] == std::byte{0});      // read
    CHECK(w[5] == std::byte{48});     // header length
    CHECK(w[6] == std::byte{9});      // sender length, low byte
    CHECK(w[8] == std::byte{10});     // message length, low byte
    CHECK(w[12] == std::byte{2});     // descriptors
    CHECK(w[16] == std::byte{0x08});  // bytes, least significant first
    CHECK(w[23] == std::byte{0x01});
    CHECK(w[24] == std::byte{0x4b});  // trace id
    CHECK(w[40] == std::byte{0x00});  // span id
    CHECK(w[48] == std::byte{'p'});
    CHECK(w[57] == std::byte{'b'});
}

TEST_CASE("a standalone notification carries no transfer fields and no trace", "[notification]") {
    notification in;
    in.remote_agent = "a";
    in.message = std::string(xtel::max_notification, 'm');
    notification out;
    REQUIRE(decode_notification(encoded(in), out).empty());
    CHECK_FALSE(out.transfer);
    CHECK_FALSE(out.traced);
    CHECK(out.bytes == 0);
    CHECK(out.message.size() == xtel::max_notification);
}

TEST_CASE("the decoder refuses each way a message can be malformed, saying which",
          "[notification]") {
    const auto good = encoded(transfer_notification());
    auto w = good;
    CHECK(decode_error({good.begin(), good.begin() + 47}) == "shorter than the 48-byte header");
    w = good;
    w[0] = std::byte{'X'};
    CHECK(decode_error(w) == "not a notification (no 'xn' magic)");
    w = good;
    w[2] = std::byte{2};
    CHECK(decode_error(w) == "a version this agent does not read (it reads 1)");
    w = good;
    w[3] = std::byte{7};
    CHECK(decode_error(w) == "unknown flags");
    w = good;
    w[5] = std::byte{47};
    CHECK(decode_error(w) == "a header length under 48 bytes");
    w = good;
    w[6] = std::byte{0};
    CHECK(decode_error(w) == "a sender name of 0 or more than 255 bytes");
    w = good;
    w[9] = std::byte{0x10};  // message length 4096 + 10
    CHECK(decode_error(w) == "a message longer than 4096 bytes");
    w = good;
    w.push_back(std::byte{0});
    CHECK(decode_error(w) == "a length that does not match its header");
    w = good;
    w[4] = std::byte{2};
    CHECK(decode_error(w) == "an unknown transfer operation");
    w = good;
    w[3] = std::byte{2};  // traced, yet bytes and descriptors set
    CHECK(decode_error(w) == "transfer fields set on a notification that follows no transfer");
    w = good;
    w[3] = std::byte{1};  // not traced, yet a trace id
    CHECK(decode_error(w) == "a trace context that contradicts its flag");
}

TEST_CASE("a longer header from a later minor revision is skipped, not refused", "[notification]") {
    auto w = encoded(transfer_notification());
    w.insert(w.begin() + 48, 8, std::byte{0xee});
    w[5] = std::byte{56};
    notification out;
    REQUIRE(decode_notification(w, out).empty());
    CHECK(out.remote_agent == "prefill-0");
    CHECK(out.message == "blocks 3,4");
}

TEST_CASE("a notification carries the trace its transfer's spans are in, by the spans' rules",
          "[notification]") {
    notification n;
    set_trace(n, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    CHECK(n.traced);
    CHECK(xtel::trace::to_hex(n.trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(xtel::trace::to_hex(n.span_id) == "00f067aa0ba902b7");
    // A bare trace id, in either case, as the spans and exemplars read it: no parent span.
    set_trace(n, "4BF92F3577B34DA6A3CE929D0E0E4736");
    CHECK(n.traced);
    CHECK(xtel::trace::to_hex(n.trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(n.span_id == std::array<std::uint8_t, 8>{});
    // A plain request id: the trace derived from it, the one its initiator's spans are in.
    set_trace(n, "req-42");
    CHECK(n.traced);
    CHECK(xtel::trace::to_hex(n.trace_id) == "fd1180d9f0c0819f00056b7b9de19fce");
    CHECK(n.span_id == std::array<std::uint8_t, 8>{});
    // Untagged: no trace.
    set_trace(n, "");
    CHECK_FALSE(n.traced);
    CHECK(n.trace_id == std::array<std::uint8_t, 16>{});
}

}  // namespace notification_codec_test
