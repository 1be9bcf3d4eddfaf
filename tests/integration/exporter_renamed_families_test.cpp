// The refusal families xtel-exporter renamed in this release (docs/metrics.md, "Renamed in this
// release"): one xtel_exporter_files_refused_total{kind, reason} by default, and beside it,
// while NIXL_TELEMETRY_COMPAT_NAMES is set, the old xtel_exporter_snapshot_read_errors_total
// with the same counts.

#include <catch2/catch.hpp>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exporter_support.hpp"
#include "prometheus_support.hpp"

namespace exporter_renamed_families_test {

namespace {

using prom_it::value_of;

/// A directory holding a node file of random bytes (not_node_file) and a notice that does not
/// parse (bad_notice), scraped until both were counted.
struct refused_files {
    xtel_test::temp_dir dir;

    refused_files() {
        std::mt19937 random(7);
        std::string noise(4096, '\0');
        for (auto& c : noise) {
            c = static_cast<char>(random());
        }
        prom_it::write_file(dir.path() / "x.metrics", noise);
        prom_it::write_file(dir.path() / "y.4242.unpublished", "not a notice\n");
    }

    std::string scrape_with(std::vector<std::pair<std::string, std::string>> env) const {
        prom_it::spawn_options o;
        o.argv = {XTEL_EXPORTER, "--listen", "127.0.0.1:0", "--dir", dir.path().string()};
        o.env = std::move(env);
        o.unset = {"NIXL_TELEMETRY_COMPAT_NAMES"};
        prom_it::child_process exporter(o);
        const int port = prom_it::served_port(exporter);
        REQUIRE(port > 0);
        return prom_it::scrape_until(
            port, [](const std::string& b) { return exporter_it::read_errors(b) == 2; });
    }
};

}  // namespace

TEST_CASE(
    "xtel-exporter counts a node file and a notice it refused by kind and reason, under "
    "the new family only by default",
    "[exporter][renamed]") {
    const refused_files files;
    const auto body = files.scrape_with({});
    INFO(body);
    CHECK(exporter_it::refused(body, "node_file", "not_node_file") == "1");
    CHECK(exporter_it::refused(body, "notice", "bad_notice") == "1");
    CHECK(exporter_it::refused(body, "node_file", "bad_notice") == std::nullopt);
    CHECK(body.find("xtel_exporter_snapshot_read_errors_total") == std::string::npos);
    CHECK(body.find("xtel_exporter_span_files_refused_total") == std::string::npos);
}

TEST_CASE(
    "NIXL_TELEMETRY_COMPAT_NAMES=1 also serves xtel_exporter_snapshot_read_errors_total, "
    "each reason the sum of the node file's and the notice's",
    "[exporter][renamed]") {
    const refused_files files;
    const auto body = files.scrape_with({{"NIXL_TELEMETRY_COMPAT_NAMES", "1"}});
    INFO(body);
    for (const auto& reason : exporter_it::refusal_reasons) {
        INFO(reason);
        CHECK(value_of(body, R"(xtel_exporter_snapshot_read_errors_total{reason=")" + reason +
                                 R"("} )") == exporter_it::read_errors(body, reason));
    }
    CHECK(value_of(body, R"(xtel_exporter_snapshot_read_errors_total{reason="not_node_file"} )") ==
          "1");
    CHECK(value_of(body, R"(xtel_exporter_snapshot_read_errors_total{reason="bad_notice"} )") ==
          "1");
    CHECK(prom_it::sum_of(body, "xtel_exporter_snapshot_read_errors_total{") == 2);
}

TEST_CASE("xtel-exporter refuses a NIXL_TELEMETRY_COMPAT_NAMES that is no boolean, naming it",
          "[exporter][renamed]") {
    prom_it::spawn_options o;
    o.argv = {XTEL_EXPORTER, "--listen", "127.0.0.1:0"};
    o.env = {{"NIXL_TELEMETRY_COMPAT_NAMES", "maybe"}};
    prom_it::child_process exporter(o);
    const auto said = exporter.read_line("NIXL_TELEMETRY_COMPAT_NAMES", std::chrono::seconds(10));
    REQUIRE(said);
    CHECK(said->find("NIXL_TELEMETRY_COMPAT_NAMES='maybe' is invalid") != std::string::npos);
    CHECK(exporter.wait(std::chrono::seconds(10)) == 64);
}

}  // namespace exporter_renamed_families_test
