#pragma once
/// HTTP/1.x request heads as the metrics endpoint judges them (private to src/): what the bytes
/// received so far on a connection amount to, and which answer a complete head gets. No I/O
/// here, so tests/fuzz/fuzz_http_request.cpp can predict every answer the real server sends.
///
/// The endpoint never reads a request body: a request that announces one is answered and the
/// connection closed, so no byte of a body can be taken for the next request.

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

namespace xtel::http {

/// Bytes a request head may take: request line, header lines and the blank line.
inline constexpr std::size_t max_head_bytes = 8192;
/// Header lines a head may hold.
inline constexpr std::size_t max_header_lines = 100;

/// The values of a header that may come on several lines, in the order sent. A list header's
/// lines mean what one line of their values joined by commas means (RFC 9110 5.3); keeping
/// them apart keeps the head a set of views, with no copy.
struct header_lines {
    /// Lines of one such header a head may hold (more are a 400): enough for any client.
    static constexpr std::size_t max_lines = 4;

    std::array<std::string_view, max_lines> lines{};
    std::size_t count = 0;

    std::span<const std::string_view> values() const noexcept { return {lines.data(), count}; }
};

/// A complete head. The views point into the bytes given to parse_request_head.
struct request_head {
    std::string_view method;
    /// The request target as sent.
    std::string_view target;
    /// The target without its query (`?...`).
    std::string_view path;
    /// HTTP/1.1; false for HTTP/1.0.
    bool http11 = true;
    /// The client wants the connection kept after the answer (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    bool keep_alive = true;
    /// A Content-Length other than 0, or any Transfer-Encoding.
    bool has_body = false;
    /// The Accept and Accept-Encoding header values (trimmed), for content negotiation.
    header_lines accept;
    header_lines accept_encoding;
    /// Bytes of the head, blank line included: where a pipelined next request starts.
    std::size_t size = 0;
};

/// What the bytes received so far amount to.
struct parse_result {
    /// 0: not complete yet, and within the limits; 200: `head` is complete; otherwise the status
    /// of the error answer: 400 (malformed, or more Accept or Accept-Encoding lines than
    /// header_lines::max_lines), 414 (request line too long), 431 (header section too long or
    /// too many lines), 505 (an HTTP version other than 1.0 and 1.1).
    int status = 0;
    request_head head;
    /// For an error: what was wrong, one line for the answer's body.
    std::string_view reason;
};

/// Judges `bytes`, everything received on a connection since the previous request ended, as a
/// request head. Looks at no more than max_head_bytes of it, and finds errors only in complete
/// lines or at that limit, so a caller may call it again only when a line end arrives.
/// Lines end with CRLF; a bare CR or LF is malformed.
parse_result parse_request_head(std::string_view bytes) noexcept;

/// The status a server of one resource at `path` answers a complete head with: 404 for
/// another path, 405 for a method other than GET and HEAD, 413 for a request with a body,
/// 200 otherwise.
int route(const request_head& head, std::string_view path) noexcept;

/// Whether the connection closes after answering `status`: after every error but 404 and 405,
/// after a request with a body (never read), and when the client asked for it.
bool closes_after(const parse_result& request, int status) noexcept;

/// The reason phrase of a status this server sends ("OK", "Not Found", ...).
std::string_view reason_phrase(int status) noexcept;

}  // namespace xtel::http
