#pragma once
// SHA-256 (FIPS 180-4), for the trace id derived from a request id (private to src/). No crypto
// library is a dependency, and the derivation needs a hash every other implementation has at
// hand: SHA-256 is in every language's standard library. Short inputs only (request ids of at
// most 56 bytes), so this favours being plain over being fast.

#include <array>
#include <cstdint>
#include <string_view>

namespace xtel::trace::detail {

using sha256_digest = std::array<std::uint8_t, 32>;

/// The SHA-256 of `data`'s bytes.
sha256_digest sha256(std::string_view data) noexcept;

}  // namespace xtel::trace::detail
