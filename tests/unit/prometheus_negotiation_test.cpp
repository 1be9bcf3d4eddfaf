// Content negotiation of /metrics (include/xtel/http/negotiate.hpp): which format and
// encoding the Accept and Accept-Encoding headers get.

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "xtel/http/negotiate.hpp"
#include "xtel/http/request.hpp"

namespace prometheus_negotiation_test {

using xtel::http::negotiate;
using xtel::metrics::exposition;

namespace {

/// What Prometheus 2.42 sends when scraping with OpenMetrics enabled (its default).
constexpr std::string_view prometheus_2_42_accept =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// What Prometheus 2.42 sends when started with --enable-feature=native-histograms
/// (scrape.go's scrapeAcceptHeaderWithProtobuf), verbatim.
constexpr std::string_view prometheus_2_42_native_histograms_accept =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,"
    "application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

exposition format_for(std::string_view accept) {
    return negotiate(accept, "").format;
}

}  // namespace

TEST_CASE("the accept header of prometheus 2.42 gets openmetrics") {
    CHECK(format_for(prometheus_2_42_accept) == exposition::openmetrics);
}

TEST_CASE(
    "the accept header of prometheus 2.42 with native histograms gets protobuf, gzipped "
    "when asked") {
    CHECK(format_for(prometheus_2_42_native_histograms_accept) == exposition::protobuf);
    const auto r = negotiate(prometheus_2_42_native_histograms_accept, "gzip");
    CHECK(r.format == exposition::protobuf);
    CHECK(r.gzip);
}

TEST_CASE("accept headers choose protobuf only when preferred strictly over both text formats") {
    struct row {
        std::string_view accept;
        exposition expected;
    };
    const std::vector<row> table = {
        {"application/vnd.google.protobuf", exposition::protobuf},
        {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily",
         exposition::protobuf},
        {"application/vnd.google.protobuf;encoding=delimited", exposition::protobuf},
        {"Application/Vnd.Google.Protobuf; proto=\"io.prometheus.client.MetricFamily\"; "
         "encoding=\"delimited\"",
         exposition::protobuf},
        // Another message, or the text encodings Prometheus 1.x asked for: not served.
        {"application/vnd.google.protobuf;proto=io.prometheus.client.Other", exposition::text},
        {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
         exposition::text},
        {"application/vnd.google.protobuf;encoding=compact-text,*/*;q=0.1", exposition::text},
        // Equal quality: a text format.
        {"application/vnd.google.protobuf,text/plain", exposition::text},
        {"application/vnd.google.protobuf,application/openmetrics-text", exposition::openmetrics},
        {"application/*", exposition::openmetrics},
        {"*/*", exposition::text},
        {"application/vnd.google.protobuf;q=0.9,application/openmetrics-text;q=0.8",
         exposition::protobuf},
        {"application/vnd.google.protobuf;q=0,*/*", exposition::text},
        {"application/vnd.google.protobuf;q=0.5,text/plain;q=0", exposition::protobuf},
        // The more specific range decides.
        {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;q=0.2,"
         "application/vnd.google.protobuf;q=0.9,text/plain;q=0.5",
         exposition::text},
    };
    for (const auto& r : table) {
        INFO("Accept: " << r.accept);
        CHECK(format_for(r.accept) == r.expected);
    }
}

TEST_CASE("accept headers choose openmetrics only when preferred strictly over text") {
    struct row {
        std::string_view accept;
        exposition expected;
    };
    const std::vector<row> table = {
        // curl, browsers, and no header at all: the text format, as always.
        {"*/*", exposition::text},
        {"", exposition::text},
        {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", exposition::text},
        {"text/plain", exposition::text},
        {"text/plain;version=0.0.4", exposition::text},
        // OpenMetrics of a version served, or of none.
        {"application/openmetrics-text", exposition::openmetrics},
        {"application/openmetrics-text; version=1.0.0", exposition::openmetrics},
        {"application/openmetrics-text;version=0.0.1", exposition::openmetrics},
        {"application/openmetrics-text;version=\"1.0.0\"", exposition::openmetrics},
        {"APPLICATION/OpenMetrics-Text;Version=1.0.0", exposition::openmetrics},
        {"application/*", exposition::openmetrics},
        // A version not served does not match.
        {"application/openmetrics-text;version=2.0.0", exposition::text},
        {"application/openmetrics-text;version=2.0.0,*/*;q=0.1", exposition::text},
        // Equal quality: text, since OpenMetrics must be preferred strictly.
        {"application/openmetrics-text,text/plain", exposition::text},
        {"application/openmetrics-text;q=0.5,*/*;q=0.5", exposition::text},
        {"application/openmetrics-text;q=0.5,text/plain;q=0.4", exposition::openmetrics},
        {"text/plain;q=0.4,application/openmetrics-text;q=0.5", exposition::openmetrics},
        // The most specific range decides: text excluded, */* accepting the rest.
        {"text/plain;q=0,*/*", exposition::openmetrics},
        {"text/*;q=0.1,application/openmetrics-text;q=0.2", exposition::openmetrics},
        {"text/plain;version=0.0.4;q=0.9,text/plain;q=0.1,application/openmetrics-text;q=0.5",
         exposition::text},
        // q=0: not acceptable.
        {"application/openmetrics-text;q=0", exposition::text},
        {"application/openmetrics-text;q=0.000,text/plain;q=0", exposition::text},
        // Garbage, and ranges that do not parse, are ignored.
        {"garbage", exposition::text},
        {";;;,,,", exposition::text},
        {"application/openmetrics-text;q=2", exposition::text},
        {"application/openmetrics-text;q=0.5x", exposition::text},
        {"application/openmetrics-text;q", exposition::text},
        {"application/openmetrics-text;q=1.0001", exposition::text},
        {"application/openmetrics-text;q=abc,text/plain;q=0.1", exposition::text},
        {"bad range,application/openmetrics-text", exposition::openmetrics},
        {"application/openmetrics-text;x=\"a,b;q=0\"", exposition::openmetrics},
        {"application/openmetrics-text ; q=0.9 , text/plain ; q=0.8", exposition::openmetrics},
    };
    for (const auto& r : table) {
        INFO("Accept: " << r.accept);
        CHECK(format_for(r.accept) == r.expected);
    }
}

TEST_CASE("accept encoding chooses gzip when gzip or any coding is acceptable") {
    struct row {
        std::string_view accept_encoding;
        bool gzip;
    };
    const std::vector<row> table = {
        {"", false},
        {"gzip", true},
        {"GZIP", true},
        {"x-gzip", true},
        {"gzip, deflate, br", true},
        {"deflate, br", false},
        {"*", true},
        {"identity", false},
        {"gzip;q=0", false},
        {"gzip;q=0.001", true},
        {"gzip;q=0,*", false},
        {"*;q=0", false},
        {"br;q=1.0, gzip;q=0.8, *;q=0.1", true},
        {"identity;q=1,*;q=0", false},
        {"gzip;q=x", false},
        {"gzip;;", false},
        {",,gzip,,", true},
    };
    for (const auto& r : table) {
        INFO("Accept-Encoding: " << r.accept_encoding);
        CHECK(negotiate("", r.accept_encoding).gzip == r.gzip);
    }
}

TEST_CASE("a header on several lines means what its lines joined by commas mean") {
    const std::vector<std::string_view> accept = {"text/plain;q=0.5",
                                                  "application/openmetrics-text"};
    const std::vector<std::string_view> encoding = {"deflate", "gzip;q=0.5"};
    const auto r = negotiate(accept, encoding);
    CHECK(r.format == exposition::openmetrics);
    CHECK(r.gzip);
    const std::vector<std::string_view> none;
    CHECK(negotiate(none, none) == xtel::http::representation{});
}

TEST_CASE("each format answers with its content type") {
    CHECK(xtel::http::content_type(exposition::text) == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(xtel::http::content_type(exposition::openmetrics) ==
          "application/openmetrics-text; version=1.0.0; charset=utf-8");
    // As Prometheus's client libraries answer it (client_golang's expfmt.ProtoFmt).
    CHECK(xtel::http::content_type(exposition::protobuf) ==
          "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
          "encoding=delimited");
}

TEST_CASE("every representation has its own place in a cache") {
    using xtel::http::index_of;
    using xtel::http::representation;
    std::vector<bool> taken(xtel::http::representation_count, false);
    for (const auto format : {exposition::text, exposition::openmetrics, exposition::protobuf}) {
        for (const bool gzip : {false, true}) {
            const std::size_t i = index_of(representation{format, gzip});
            REQUIRE(i < taken.size());
            CHECK(!taken[i]);
            taken[i] = true;
        }
    }
}

// ---- the request head carries the two headers to the negotiation ---------------------------

TEST_CASE("a request head keeps its Accept and Accept-Encoding values trimmed") {
    const auto r = xtel::http::parse_request_head(
        "GET /metrics HTTP/1.1\r\nHost: x\r\naccept:  application/openmetrics-text;q=0.9 \r\n"
        "ACCEPT-ENCODING:\tgzip\r\n\r\n");
    REQUIRE(r.status == 200);
    REQUIRE(r.head.accept.values().size() == 1);
    CHECK(r.head.accept.values()[0] == "application/openmetrics-text;q=0.9");
    REQUIRE(r.head.accept_encoding.values().size() == 1);
    CHECK(r.head.accept_encoding.values()[0] == "gzip");
    const auto rep = negotiate(r.head.accept.values(), r.head.accept_encoding.values());
    CHECK(rep.format == exposition::openmetrics);
    CHECK(rep.gzip);
}

TEST_CASE("a request head without the two headers negotiates plain text") {
    const auto r = xtel::http::parse_request_head("GET /metrics HTTP/1.1\r\n\r\n");
    REQUIRE(r.status == 200);
    CHECK(r.head.accept.values().empty());
    CHECK(r.head.accept_encoding.values().empty());
    CHECK(negotiate(r.head.accept.values(), r.head.accept_encoding.values()) ==
          xtel::http::representation{});
}

TEST_CASE("repeated Accept lines are all kept in order and past four the request is refused") {
    const auto r = xtel::http::parse_request_head(
        "GET /metrics HTTP/1.1\r\nAccept: text/plain;q=0.2\r\nAccept-Encoding: br\r\n"
        "Accept: application/openmetrics-text;q=0.3\r\nAccept-Encoding: gzip\r\n\r\n");
    REQUIRE(r.status == 200);
    const auto accept = r.head.accept.values();
    REQUIRE(accept.size() == 2);
    CHECK(accept[0] == "text/plain;q=0.2");
    CHECK(accept[1] == "application/openmetrics-text;q=0.3");
    CHECK(r.head.accept_encoding.values().size() == 2);
    CHECK(negotiate(accept, r.head.accept_encoding.values()) ==
          xtel::http::representation{exposition::openmetrics, true});

    std::string five = "GET /metrics HTTP/1.1\r\n";
    for (int i = 0; i < 5; ++i) {
        five += "Accept-Encoding: gzip\r\n";
    }
    const auto refused = xtel::http::parse_request_head(five + "\r\n");
    CHECK(refused.status == 400);
    CHECK(refused.reason.find("Accept-Encoding") != std::string_view::npos);
}

}  // namespace prometheus_negotiation_test
