#include "xtel/push/push_url.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>

#include "xtel/core/parse.hpp"

namespace xtel::push {

namespace {

/// What is wrong with `url`, or empty when nothing is.
std::string problem(std::string_view url) {
    for (std::size_t i = 0; i < url.size(); ++i) {
        const auto c = static_cast<unsigned char>(url[i]);
        if (c == ' ') {
            return fmt::format("byte {} is a space", i);
        }
        if (c < 0x20 || c == 0x7f) {
            return fmt::format("byte {} is a control byte", i);
        }
    }
    // In lower case, as http_pusher takes it (libcurl would take any case).
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos ||
        (url.substr(0, scheme_end) != "http" && url.substr(0, scheme_end) != "https")) {
        return "it does not start with http:// or https://";
    }
    std::string_view authority = url.substr(scheme_end + 3);
    authority = authority.substr(0, authority.find_first_of("/?#"));
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        authority.remove_prefix(at + 1);  // user:password@
    }
    std::string_view host = authority;
    std::string_view rest;
    if (authority.starts_with('[')) {  // an IPv6 address: [::1]:4318
        const auto close = authority.find(']');
        if (close == std::string_view::npos) {
            return "its host starts with '[' but has no ']'";
        }
        host = authority.substr(0, close + 1);
        rest = authority.substr(close + 1);
        if (host.size() == 2) {
            host = {};
        }
    } else {
        host = authority.substr(0, authority.find(':'));
        rest = authority.substr(host.size());
    }
    if (host.empty()) {
        return "it has no host";
    }
    if (!rest.empty()) {
        const std::string_view port = rest.substr(1);
        std::uint32_t n = 0;
        const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
        if (!rest.starts_with(':') || port.empty() || ec != std::errc() ||
            end != port.data() + port.size() || n < 1 || n > 65535) {
            return fmt::format("'{}' after its host is not ':' and a port from 1 to 65535", rest);
        }
    }
    return {};
}

}  // namespace

void check_push_url(std::string_view source, std::string_view url, std::string_view example) {
    if (const std::string why = problem(url); !why.empty()) {
        parse::fail(
            source, url,
            fmt::format("expected an http:// or https:// URL with a host, without spaces or "
                        "control bytes (for example {}); {}",
                        example, why));
    }
}

}  // namespace xtel::push
