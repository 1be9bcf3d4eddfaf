// The /metrics body (include/xtel/http/metrics_body.hpp) that the agents' endpoint and
// xtel-exporter both serve: the representation negotiated, each rendered once per set of
// snapshots, gzip only when the request accepts it.

#include <catch2/catch.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/http/gzip.hpp"
#include "xtel/http/metrics_body.hpp"
#include "xtel/http/negotiate.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/metric_store.hpp"

namespace http_metrics_body_test {

namespace {

using xtel::http::metrics_body;
using xtel::http::negotiate;
using xtel::metrics::exposition;

/// One snapshot with the counter requests_total at `value`.
metrics_body::snapshots counter_at(std::uint64_t value) {
    xtel::metrics::metric_store store;
    const auto f =
        store.add_family({"requests_total", "Requests.", xtel::metrics::metric_type::counter, {}});
    store.set(store.series_of(f, std::span<const std::string_view>{}), value);
    return {std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::take_snapshot(store))};
}

constexpr std::string_view openmetrics_accept = "application/openmetrics-text; version=1.0.0";

}  // namespace

TEST_CASE("a body asked for again is the one rendered first, not rendered again", "[http]") {
    metrics_body body;
    body.show(counter_at(7));
    const auto first = body.body({exposition::text, false});
    const auto second = body.body({exposition::text, false});
    CHECK(second == first);
    CHECK(body.renderings() == 1);
    CHECK(first->find("\nrequests_total 7\n") != std::string::npos);
}

TEST_CASE("the same snapshots shown again keep the bodies; new ones are rendered again", "[http]") {
    metrics_body body;
    const auto seven = counter_at(7);
    CHECK(body.show(seven));
    const auto first = body.body({exposition::text, false});
    CHECK_FALSE(body.show(seven));
    CHECK(body.body({exposition::text, false}) == first);
    CHECK(body.renderings() == 1);
    CHECK(body.show(counter_at(8)));
    const auto after = body.body({exposition::text, false});
    CHECK(body.renderings() == 2);
    CHECK(after->find("\nrequests_total 8\n") != std::string::npos);
    CHECK(first->find("\nrequests_total 7\n") != std::string::npos);  // held answers keep theirs
}

TEST_CASE("each format is rendered once, and a gzip body is compressed from the kept plain one",
          "[http]") {
    metrics_body body;
    body.show(counter_at(3));
    const auto gz = body.body({exposition::openmetrics, true});
    CHECK(body.renderings() == 1);
    CHECK(body.compressions() == 1);
    const auto plain = body.body({exposition::openmetrics, false});
    CHECK(body.renderings() == 1);  // the plain body the gzip one was made from
    CHECK(plain->ends_with("# EOF\n"));
    CHECK(*gz == xtel::http::gzip(*plain, metrics_body::default_gzip_level));
    body.body({exposition::text, false});
    body.body({exposition::protobuf, false});
    CHECK(body.renderings() == 3);
    CHECK(body.compressions() == 1);
}

TEST_CASE("the answer is gzipped only when the request accepts gzip", "[http]") {
    metrics_body body;
    body.show(counter_at(1));
    const auto plain = body.answer(negotiate(openmetrics_accept, ""));
    CHECK_FALSE(plain.gzip);
    CHECK(body.compressions() == 0);
    CHECK(plain.content_type == "application/openmetrics-text; version=1.0.0; charset=utf-8");
    const auto refused = body.answer(negotiate(openmetrics_accept, "gzip;q=0, identity"));
    CHECK_FALSE(refused.gzip);
    CHECK(refused.body == plain.body);
    CHECK(body.compressions() == 0);
    const auto gz = body.answer(negotiate(openmetrics_accept, "br, gzip"));
    CHECK(gz.gzip);
    CHECK(body.compressions() == 1);
    REQUIRE(gz.body->size() > 2);
    CHECK(static_cast<unsigned char>((*gz.body)[0]) == 0x1f);  // gzip's magic
    CHECK(static_cast<unsigned char>((*gz.body)[1]) == 0x8b);
}

TEST_CASE("the answer a request without Accept gets is the text format's", "[http]") {
    metrics_body body;
    body.show(counter_at(2));
    const auto a = body.answer(negotiate("", ""));
    CHECK(a.content_type == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(*a.body ==
          "# HELP requests_total Requests.\n# TYPE requests_total counter\n"
          "requests_total 2\n");
}

TEST_CASE("a rendering that leaves families out says how many", "[http]") {
    // Two snapshots whose families clash in OpenMetrics: a histogram lat (whose samples
    // include lat_created there) and a gauge lat_created.
    constexpr std::span<const std::string_view> no_labels{};
    xtel::metrics::metric_store a;
    a.observe(a.series_of(
                  a.add_family({"lat", "h", xtel::metrics::metric_type::histogram, {}, 0, {1, 2}}),
                  no_labels),
              1);
    xtel::metrics::metric_store b;
    b.set(b.series_of(b.add_family({"lat_created", "h", xtel::metrics::metric_type::gauge, {}}),
                      no_labels),
          2);
    std::size_t told = 0;
    metrics_body body(metrics_body::default_gzip_level, [&](std::size_t n) { told += n; });
    body.show({std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::take_snapshot(a)),
               std::make_shared<const xtel::metrics::snapshot>(xtel::metrics::take_snapshot(b))});
    body.body({exposition::text, false});
    CHECK(told == 0);
    body.body({exposition::openmetrics, false});
    CHECK(told == 1);
}

}  // namespace http_metrics_body_test
