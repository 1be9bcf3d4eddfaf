#include "xtel/http/request.hpp"

#include <algorithm>

#include "http/token.hpp"

namespace xtel::http {

namespace {

using detail::equals_ignoring_case;
using detail::is_token;
using detail::trim_ows;

/// Visible ASCII: what a request target may hold.
constexpr bool is_vchar(char c) noexcept {
    return c > 0x20 && c < 0x7f;
}

/// A header value: visible characters, space, tab and bytes above 0x7f; no other control
/// character, so nothing in a value can end a line or hide one.
constexpr bool is_value_char(char c) noexcept {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
}

enum class line_state { complete, incomplete, malformed };

/// The line that starts at `pos`, without its CRLF; `pos` moves past it.
line_state next_line(std::string_view window, std::size_t& pos, std::string_view& line) noexcept {
    const auto end = window.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
        return line_state::incomplete;
    }
    if (window[end] == '\n') {
        return line_state::malformed;
    }
    if (end + 1 == window.size()) {
        return line_state::incomplete;
    }
    if (window[end + 1] != '\n') {
        return line_state::malformed;
    }
    line = window.substr(pos, end - pos);
    pos = end + 2;
    return line_state::complete;
}

parse_result error(int status, std::string_view reason) noexcept {
    parse_result r;
    r.status = status;
    r.reason = reason;
    return r;
}

/// Applies the comma-separated options of a Connection header.
void apply_connection(std::string_view value, bool& keep_alive) noexcept {
    while (!value.empty()) {
        const auto comma = value.find(',');
        const auto option = trim_ows(value.substr(0, comma));
        if (equals_ignoring_case(option, "close")) {
            keep_alive = false;
            return;  // close wins over anything else listed
        }
        if (equals_ignoring_case(option, "keep-alive")) {
            keep_alive = true;
        }
        value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    }
}

/// Adds a line's value to a header that may be repeated; false past the limit of lines.
bool add_line(header_lines& h, std::string_view value) noexcept {
    if (h.count == header_lines::max_lines) {
        return false;
    }
    h.lines[h.count++] = value;
    return true;
}

/// Reads the request line into `h`. An error's status, or 0 when the line is well formed.
parse_result read_request_line(std::string_view line, request_head& h) noexcept {
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) {
        return error(400, "the request line is not: method, target, version");
    }
    h.method = line.substr(0, sp1);
    h.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const auto version = line.substr(sp2 + 1);
    if (!is_token(h.method)) {
        return error(400, "the method is not a token");
    }
    if (h.target.empty() || !std::all_of(h.target.begin(), h.target.end(), is_vchar)) {
        return error(400, "the request target is empty or holds a character that is not visible");
    }
    if (version == "HTTP/1.1") {
        h.http11 = true;
    } else if (version == "HTTP/1.0") {
        h.http11 = false;
    } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[5] >= '0' &&
               version[5] <= '9' && version[6] == '.' && version[7] >= '0' && version[7] <= '9') {
        return error(505, "only HTTP/1.0 and HTTP/1.1 are served");
    } else {
        return error(400, "the protocol version is not HTTP/<digit>.<digit>");
    }
    h.path = h.target.substr(0, h.target.find('?'));
    h.keep_alive = h.http11;
    return {};
}

/// What the header lines seen so far say about the request.
struct header_state {
    bool saw_length = false;
    std::string_view length;
};

/// Applies one header line to `h`. An error's status, or 0 when the line is well formed.
parse_result read_header_line(std::string_view line, request_head& h, header_state& s) noexcept {
    if (line.front() == ' ' || line.front() == '\t') {
        return error(400, "a header line is folded");  // obsolete, and ambiguous
    }
    const auto colon = line.find(':');
    const auto name = line.substr(0, colon);
    if (colon == std::string_view::npos || !is_token(name)) {
        return error(400, "a header line is not a name, a colon and a value");
    }
    const auto value = trim_ows(line.substr(colon + 1));
    if (!std::all_of(value.begin(), value.end(), is_value_char)) {
        return error(400, "a header value holds a control character");
    }
    if (equals_ignoring_case(name, "content-length")) {
        const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
            return c >= '0' && c <= '9';
        });
        if (!digits || (s.saw_length && value != s.length)) {
            return error(400, "the Content-Length is not one number");
        }
        s.saw_length = true;
        s.length = value;
        h.has_body = h.has_body || value.find_first_not_of('0') != std::string_view::npos;
    } else if (equals_ignoring_case(name, "transfer-encoding")) {
        h.has_body = true;
    } else if (equals_ignoring_case(name, "connection")) {
        apply_connection(value, h.keep_alive);
    } else if (equals_ignoring_case(name, "accept")) {
        if (!add_line(h.accept, value)) {
            return error(400, "the request has more Accept lines than the limit (4)");
        }
    } else if (equals_ignoring_case(name, "accept-encoding")) {
        if (!add_line(h.accept_encoding, value)) {
            return error(400, "the request has more Accept-Encoding lines than the limit (4)");
        }
    }
    return {};
}

}  // namespace

parse_result parse_request_head(std::string_view bytes) noexcept {
    const std::string_view window = bytes.substr(0, max_head_bytes);
    const bool at_limit = bytes.size() >= max_head_bytes;
    std::size_t pos = 0;
    std::string_view line;

    // The request line; empty lines before it are ignored (RFC 9112 2.2), as some clients send
    // a CRLF after a request.
    while (true) {
        const auto state = next_line(window, pos, line);
        if (state == line_state::malformed) {
            return error(400, "a line does not end with CRLF");
        }
        if (state == line_state::incomplete) {
            return at_limit ? error(414, "the request line is longer than the limit")
                            : parse_result{};
        }
        if (!line.empty()) {
            break;
        }
    }
    parse_result r;
    request_head& h = r.head;
    if (parse_result e = read_request_line(line, h); e.status != 0) {
        return e;
    }

    header_state headers;
    for (std::size_t lines = 0;; ++lines) {
        const auto state = next_line(window, pos, line);
        if (state == line_state::malformed) {
            return error(400, "a line does not end with CRLF");
        }
        if (state == line_state::incomplete) {
            return at_limit ? error(431, "the header section is longer than the limit")
                            : parse_result{};
        }
        if (line.empty()) {
            break;
        }
        if (lines == max_header_lines) {
            return error(431, "the header section has more lines than the limit");
        }
        if (parse_result e = read_header_line(line, h, headers); e.status != 0) {
            return e;
        }
    }
    h.size = pos;
    r.status = 200;
    return r;
}

int route(const request_head& head, std::string_view path) noexcept {
    if (head.path != path) {
        return 404;
    }
    if (head.method != "GET" && head.method != "HEAD") {
        return 405;
    }
    return head.has_body ? 413 : 200;
}

bool closes_after(const parse_result& request, int status) noexcept {
    if (request.status != 200) {
        return true;  // the head itself was wrong: where the next request starts is unknown
    }
    if (status != 200 && status != 404 && status != 405) {
        return true;
    }
    return request.head.has_body || !request.head.keep_alive;
}

std::string_view reason_phrase(int status) noexcept {
    switch (status) {
        case 200:
            return "OK";
        case 400:
            return "Bad Request";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 413:
            return "Payload Too Large";
        case 414:
            return "URI Too Long";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Error";
    }
}

}  // namespace xtel::http
