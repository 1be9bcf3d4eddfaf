#pragma once
/// Which representation of /metrics a request gets: the exposition format from its Accept
/// header, gzip or not from its Accept-Encoding header. HTTP's part of serving metrics, beside
/// the body cache (metrics_body.hpp). Pure, so that tests/fuzz/fuzz_negotiate.cpp can feed it
/// anything.
///
/// Accept (RFC 9110 12.5.1): media ranges with q-values. Prometheus's protobuf format is chosen
/// only when the client prefers it strictly: its quality (that of the most specific range
/// matching `application/vnd.google.protobuf` with proto=io.prometheus.client.MetricFamily and
/// encoding=delimited, or without those parameters) is above 0 and above the qualities of
/// OpenMetrics and of the text format. Failing that, OpenMetrics is chosen only when the
/// client prefers it strictly: its quality (that of the most specific range matching
/// `application/openmetrics-text` with version 1.0.0, 0.0.1 or none) is above 0 and above the
/// quality of the text format (`text/plain` with version 0.0.4 or none). A more specific range
/// decides over a less specific one (`text/plain;q=0, */*` excludes text). A range that does
/// not parse is ignored; no header, or one that matches neither, gets the text format, as
/// Prometheus servers always did. Prometheus 2.x asks
///     application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;
///     q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1
/// (one line) and gets OpenMetrics; with --enable-feature=native-histograms (2.42) it asks
///     application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;
///     encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,
///     application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1
/// and gets protobuf, the one format that carries native histograms to it; curl's `*/*` gets
/// text.
///
/// Accept-Encoding (RFC 9110 12.5.3): gzip when `gzip` (or `x-gzip`), or failing those `*`,
/// is listed with a q above 0.
///
/// Either header may come on several lines: a list header's lines mean what one line of their
/// values joined by commas means (RFC 9110 5.3), so each is given as the values of its lines.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "xtel/http/request.hpp"
#include "xtel/metrics/exposition.hpp"

namespace xtel::http {

/// One representation of /metrics: a format, compressed or not.
struct representation {
    metrics::exposition format = metrics::exposition::text;
    bool gzip = false;

    friend bool operator==(const representation&, const representation&) = default;
};

/// Representations there are: formats (text, openmetrics, protobuf) x (plain, gzip).
inline constexpr std::size_t representation_count = 6;

/// 0 to representation_count - 1: where a cache keeps `r`.
constexpr std::size_t index_of(representation r) noexcept {
    return static_cast<std::size_t>(r.format) * 2 + (r.gzip ? 1 : 0);
}

/// The Content-Type of an answer in `format`.
std::string_view content_type(metrics::exposition format) noexcept;

/// The representation a request with these Accept and Accept-Encoding header lines gets.
representation negotiate(std::span<const std::string_view> accept,
                         std::span<const std::string_view> accept_encoding) noexcept;

/// The same for a request with at most one line of each (empty: none).
representation negotiate(std::string_view accept, std::string_view accept_encoding) noexcept;

/// The same for a request's head.
inline representation negotiate(const request_head& head) noexcept {
    return negotiate(head.accept.values(), head.accept_encoding.values());
}

}  // namespace xtel::http
