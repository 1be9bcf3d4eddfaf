#include "xtel/trace/context.hpp"

#include <unistd.h>

#include <chrono>
#include <random>

#include "trace/sha256.hpp"
#include "xtel/core/ascii.hpp"

namespace xtel::trace {

namespace {

/// Reads 2 * N hex digits of `s` into `out`; false when one is not a hex digit or all are zero.
template <std::size_t N>
bool read_id(std::string_view s, std::array<std::uint8_t, N>& out) noexcept {
    if (s.size() != 2 * N) {
        return false;
    }
    for (std::size_t i = 0; i < N; ++i) {
        const int hi = ascii::hex_value(s[2 * i]);
        const int lo = ascii::hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return !is_zero(out);
}

std::uint64_t random_seed() {
    std::uint64_t seed = 0;
    try {
        std::random_device device;
        seed = static_cast<std::uint64_t>(device()) << 32 | device();
    } catch (...) {
        // No entropy source: the clock and the pid still set processes apart.
    }
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    return seed ^ id_generator::mix(static_cast<std::uint64_t>(now) ^
                                    static_cast<std::uint64_t>(::getpid()) << 40);
}

}  // namespace

std::optional<context> parse_traceparent(std::string_view s) noexcept {
    // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
    if (s.size() < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') {
        return std::nullopt;
    }
    const int v_hi = ascii::hex_value(s[0]);
    const int v_lo = ascii::hex_value(s[1]);
    if (v_hi < 0 || v_lo < 0) {
        return std::nullopt;
    }
    const int version = v_hi << 4 | v_lo;
    // Version 255 is invalid; version 00 has exactly these fields; a later version may append
    // fields after a '-', which a reader of version 00 leaves alone (W3C Trace Context).
    if (version == 0xff || (version == 0 && s.size() != 55) ||
        (version != 0 && s.size() > 55 && s[55] != '-')) {
        return std::nullopt;
    }
    context c;
    if (!read_id(s.substr(3, 32), c.trace) || !read_id(s.substr(36, 16), c.parent)) {
        return std::nullopt;
    }
    const int f_hi = ascii::hex_value(s[53]);
    const int f_lo = ascii::hex_value(s[54]);
    if (f_hi < 0 || f_lo < 0) {
        return std::nullopt;
    }
    c.flags = static_cast<std::uint8_t>(f_hi << 4 | f_lo);
    c.from = origin::traceparent;
    return c;
}

trace_id derive_trace_id(std::string_view request_id) noexcept {
    const auto digest = detail::sha256(request_id);
    trace_id t{};
    for (std::size_t i = 0; i < t.size(); ++i) {
        t[i] = digest[i];
    }
    if (is_zero(t)) {
        t[15] = 1;
    }
    return t;
}

std::optional<context> context_of(std::string_view request_id) noexcept {
    if (request_id.empty()) {
        return std::nullopt;
    }
    if (auto c = parse_traceparent(request_id)) {
        return c;
    }
    context c;
    if (read_id(request_id, c.trace)) {
        c.from = origin::trace_id;
        return c;
    }
    c.trace = derive_trace_id(request_id);
    c.from = origin::derived;
    return c;
}

id_generator::id_generator() : state_(random_seed()) {}

}  // namespace xtel::trace
