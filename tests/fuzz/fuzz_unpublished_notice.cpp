// Fuzz target: parse arbitrary bytes as an unpublished notice (docs/node-format.md, "The
// unpublished notice"). Any input must end in notice_error or a record, never a crash or an
// out-of-bounds access; a record parsed must format back to exactly the bytes it came from (one
// encoding per record), and any record formatted must parse back to itself, cut to fit.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "xtel/node/notice.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        const auto n = xtel::node::parse_notice(bytes);
        if (xtel::node::format_notice(n) != bytes) {
            std::abort();  // accepted, yet not the one encoding of its record
        }
    } catch (const xtel::node::notice_error&) {
        // refused: fine
    }
    // The input's bytes as every value of a record: what is formatted fits and parses back.
    xtel::node::notice n;
    n.agent_name = bytes.empty() ? std::string("a") : std::string(bytes.substr(0, 300));
    n.pid = 1 + static_cast<std::uint32_t>(size);
    n.node_file = std::string(bytes);
    n.reason = "name_taken";
    n.error = std::string(bytes) + std::string(bytes);
    const std::string formatted = xtel::node::format_notice(n);
    if (formatted.size() > xtel::node::max_notice_bytes) {
        std::abort();
    }
    const auto back = xtel::node::parse_notice(formatted);  // throws (and aborts) if it cannot
    if (back.agent_name != n.agent_name || back.pid != n.pid || back.reason != n.reason ||
        !n.node_file.starts_with(back.node_file) || !n.error.starts_with(back.error)) {
        std::abort();
    }
    return 0;
}
