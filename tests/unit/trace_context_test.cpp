// Trace context: the W3C traceparent a transfer's request id may be, the trace id derived from
// any other request id (SHA-256, checked against the FIPS 180-4 vectors), and new span ids.

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "trace/sha256.hpp"
#include "xtel/trace/context.hpp"

namespace trace_context_test {

namespace tr = xtel::trace;

namespace {

std::string hex(const tr::detail::sha256_digest& d) {
    return tr::to_hex(d);
}

constexpr const char* example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

}  // namespace

TEST_CASE("sha256 gives the FIPS 180-4 digests of the standard messages", "[trace_context]") {
    CHECK(hex(tr::detail::sha256("")) ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex(tr::detail::sha256("abc")) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hex(tr::detail::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("sha256 pads messages at the one- and two-block boundaries", "[trace_context]") {
    // 55 bytes: the length still fits the block; 56: it takes a second block; 64: a whole one.
    CHECK(hex(tr::detail::sha256(std::string(55, 'a'))) ==
          "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK(hex(tr::detail::sha256(std::string(56, 'a'))) ==
          "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    CHECK(hex(tr::detail::sha256(std::string(64, 'a'))) ==
          "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("a derived trace id is the first 16 bytes of the request id's SHA-256",
          "[trace_context]") {
    // The vectors of docs/trace-format.md: any implementation must reach the same ids.
    CHECK(tr::to_hex(tr::derive_trace_id("req-42")) == "fd1180d9f0c0819f00056b7b9de19fce");
    CHECK(tr::to_hex(tr::derive_trace_id("chatcmpl-7f3a2c")) == "6a228621008bb4d28e3553784930da36");
}

TEST_CASE("a W3C traceparent gives the caller's trace, parent span and flags", "[trace_context]") {
    const auto c = tr::parse_traceparent(example);
    REQUIRE(c);
    CHECK(tr::to_hex(c->trace) == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(tr::to_hex(c->parent) == "00f067aa0ba902b7");
    CHECK(c->flags == 1);
    CHECK(c->from == tr::origin::traceparent);
}

TEST_CASE("a traceparent that breaks the W3C rules is not one", "[trace_context]") {
    const char* bad[] = {
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // trace id all zero
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // parent id all zero
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // 00 with more
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   // not hex
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",   // flags not hex
        "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version not hex
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // wrong separator
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",    // short
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // later, no '-' after
        "",
    };
    for (const char* s : bad) {
        INFO(s);
        CHECK_FALSE(tr::parse_traceparent(s));
    }
}

TEST_CASE("a later traceparent version is read by its version 00 fields", "[trace_context]") {
    const auto same =
        tr::parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    const auto longer =
        tr::parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x");
    REQUIRE(same);
    REQUIRE(longer);
    CHECK(*same == *tr::parse_traceparent(example));
    CHECK(*longer == *same);
}

TEST_CASE("upper-case hex names the same trace as the exemplars read it", "[trace_context]") {
    const auto c = tr::parse_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01");
    REQUIRE(c);
    CHECK(*c == *tr::parse_traceparent(example));
}

TEST_CASE("a request id picks its trace by the first rule that applies", "[trace_context]") {
    SECTION("a traceparent") {
        const auto c = tr::context_of(example);
        REQUIRE(c);
        CHECK(c->from == tr::origin::traceparent);
        CHECK(tr::to_hex(c->parent) == "00f067aa0ba902b7");
    }
    SECTION("a trace id of 32 hex digits is the trace, with no parent") {
        const auto c = tr::context_of("4bf92f3577b34da6a3ce929d0e0e4736");
        REQUIRE(c);
        CHECK(c->from == tr::origin::trace_id);
        CHECK(tr::to_hex(c->trace) == "4bf92f3577b34da6a3ce929d0e0e4736");
        CHECK(tr::is_zero(c->parent));
    }
    SECTION("32 zeros are no trace id: derived like any other request id") {
        const std::string zeros(32, '0');
        const auto c = tr::context_of(zeros);
        REQUIRE(c);
        CHECK(c->from == tr::origin::derived);
        CHECK(c->trace == tr::derive_trace_id(zeros));
    }
    SECTION("any other request id is derived") {
        const auto c = tr::context_of("req-42");
        REQUIRE(c);
        CHECK(c->from == tr::origin::derived);
        CHECK(tr::to_hex(c->trace) == "fd1180d9f0c0819f00056b7b9de19fce");
        CHECK(tr::is_zero(c->parent));
        CHECK(c->flags == 0);
    }
    SECTION("an untagged transfer has no trace") {
        CHECK_FALSE(tr::context_of(""));
    }
}

TEST_CASE("new span and trace ids are never zero and do not repeat", "[trace_context]") {
    tr::id_generator ids;
    std::set<tr::span_id> spans;
    std::set<tr::trace_id> traces;
    for (int i = 0; i < 10000; ++i) {
        const auto s = ids.next_span_id();
        const auto t = ids.next_trace_id();
        CHECK_FALSE(tr::is_zero(s));
        CHECK_FALSE(tr::is_zero(t));
        spans.insert(s);
        traces.insert(t);
    }
    CHECK(spans.size() == 10000);
    CHECK(traces.size() == 10000);
}

TEST_CASE("two generators seeded at random give different ids", "[trace_context]") {
    tr::id_generator a;
    tr::id_generator b;
    CHECK(a.next_span_id() != b.next_span_id());
    tr::id_generator c(7);
    tr::id_generator d(7);
    CHECK(c.next_span_id() == d.next_span_id());
}

TEST_CASE("a seeded generator's ids are SplitMix64's words, least significant byte first",
          "[trace_context]") {
    // SplitMix64 from seed 0 first gives 0xe220a8397b1dcdaf; from 7, 0x63cbe1e459320dd7, then
    // 0x044c3cd7f43c661c and 0xe6984080bab12a02 (a trace id's two words).
    tr::id_generator zero(0);
    CHECK(zero.next_span_id() == tr::span_id{0xaf, 0xcd, 0x1d, 0x7b, 0x39, 0xa8, 0x20, 0xe2});
    tr::id_generator seven(7);
    CHECK(seven.next_span_id() == tr::span_id{215, 13, 50, 89, 228, 225, 203, 99});
    CHECK(seven.next_trace_id() ==
          tr::trace_id{28, 102, 60, 244, 215, 60, 76, 4, 2, 42, 177, 186, 128, 64, 152, 230});
}

}  // namespace trace_context_test
