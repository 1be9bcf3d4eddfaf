// Fuzz target: content negotiation of /metrics (include/xtel/http/negotiate.hpp). The
// input is the Accept header's lines, then a NUL byte, then the Accept-Encoding header's lines,
// lines split at LF (at most 4 of each, as a request head may hold). Besides a crash, a leak or
// undefined behaviour, a finding is a choice that breaks what the negotiation promises:
//   - the order of a header's lines does not matter;
//   - lines without quotes mean what they mean joined by commas (RFC 9110 5.3);
//   - an added line `text/plain;version=0.0.4` (quality 1, the most specific) gets text;
//   - an added line `gzip` gets gzip;
//   - an added line naming the protobuf format exactly (quality 1) gets protobuf or the format
//     chosen without it, never the other text format; after it, protobuf stays chosen;
//   - when protobuf is chosen, an added line `application/openmetrics-text;version=1.0.0`
//     gets OpenMetrics (protobuf is chosen only when preferred strictly).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/http/negotiate.hpp"
#include "xtel/http/request.hpp"

namespace {

namespace http = xtel::http;
namespace metrics = xtel::metrics;

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "fuzz_negotiate: %s\n", what);
    std::abort();
}

std::vector<std::string_view> lines_of(std::string_view s) {
    std::vector<std::string_view> out;
    while (out.size() < xtel::http::header_lines::max_lines) {
        const auto nl = s.find('\n');
        out.push_back(s.substr(0, nl));
        if (nl == std::string_view::npos) {
            break;
        }
        s.remove_prefix(nl + 1);
    }
    return out;
}

std::string joined(const std::vector<std::string_view>& lines) {
    std::string out;
    for (const auto l : lines) {
        out += out.empty() ? "" : ",";
        out += l;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto nul = input.find('\0');
    const auto accept = lines_of(input.substr(0, nul));
    const auto encoding =
        lines_of(nul == std::string_view::npos ? std::string_view{} : input.substr(nul + 1));

    const http::representation r = http::negotiate(accept, encoding);

    const std::vector<std::string_view> accept_reversed(accept.rbegin(), accept.rend());
    const std::vector<std::string_view> encoding_reversed(encoding.rbegin(), encoding.rend());
    if (http::negotiate(accept_reversed, encoding_reversed) != r) {
        finding("the order of a header's lines changed the choice");
    }

    if (input.find_first_of("\"\\") == std::string_view::npos) {
        const std::string a = joined(accept);
        const std::string e = joined(encoding);
        if (http::negotiate(a, e) != r) {
            finding("lines joined by commas got another choice than the lines");
        }
    }

    auto with_text = accept;
    with_text.push_back("text/plain;version=0.0.4");
    if (http::negotiate(with_text, encoding).format != metrics::exposition::text) {
        finding("text/plain;version=0.0.4 with quality 1 did not get text");
    }
    auto with_protobuf = accept;
    with_protobuf.push_back(
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
        "encoding=delimited");
    const auto p = http::negotiate(with_protobuf, encoding).format;
    if (p != metrics::exposition::protobuf && p != r.format) {
        finding("an added protobuf range chose another text format");
    }
    if (r.format == metrics::exposition::protobuf && p != metrics::exposition::protobuf) {
        finding("an added protobuf range made protobuf lose");
    }
    if (r.format == metrics::exposition::protobuf) {
        auto with_openmetrics = accept;
        with_openmetrics.push_back("application/openmetrics-text;version=1.0.0");
        if (http::negotiate(with_openmetrics, encoding).format !=
            metrics::exposition::openmetrics) {
            finding("protobuf was chosen over OpenMetrics of quality 1");
        }
    }
    auto with_gzip = encoding;
    with_gzip.push_back("gzip");
    if (!http::negotiate(accept, with_gzip).gzip) {
        finding("gzip with quality 1 did not get gzip");
    }
    return 0;
}
