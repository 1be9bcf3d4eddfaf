// Fuzz target: decode arbitrary bytes as a notification (docs/notifications.md), as an agent does
// with every active message it receives. Any input must be refused with a reason or decoded,
// never crash or read outside the input; a message decoded with the version-1 header must encode
// back to exactly its bytes (one encoding per message).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "agent/notification_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    xtel::notification n;
    if (!xtel::detail::decode_notification(in, n).empty()) {
        return 0;  // refused: fine
    }
    if (n.remote_agent.empty() || n.message.size() > xtel::max_notification) {
        std::abort();  // accepted what the format forbids
    }
    if (size > 5 && data[5] == xtel::detail::notification_header_v1) {
        std::vector<std::byte> again;
        xtel::detail::encode_notification(n, again);
        if (again.size() != size || !std::equal(again.begin(), again.end(), in.begin())) {
            std::abort();  // accepted, yet not the one encoding of its message
        }
    }
    return 0;
}
