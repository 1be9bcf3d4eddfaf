#pragma once
// The OTLP receiver of tests/otlp (receiver.js, decoding with the OpenTelemetry JS project's
// generated types) run as a process for a test: started on a port, its records read back from
// its directory. The metrics' and the traces' tests read different records of it.

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prometheus_support.hpp"

namespace otlp_it {

/// receiver.js on `port` (0: any), recording into `dir`, with `args` (--fail N,
/// --retry-after S, --partial-success N); stopped when this goes.
class receiver_process {
  public:
    explicit receiver_process(const std::filesystem::path& dir,
                              int port = 0,
                              std::vector<std::string> args = {})
        : dir_(dir) {
        using namespace std::chrono_literals;
        REQUIRE(std::string_view(XTEL_NODE) != "");
        prom_it::spawn_options o;
        o.argv = {XTEL_NODE,    XTEL_OTLP_RECEIVER, "--out",
                  dir.string(), "--port",           std::to_string(port)};
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        process_.emplace(o);
        const auto line = process_->read_line("listening on", 30s);
        INFO(
            "receiver output: " << process_->output()
                                << "\n(its npm packages: scripts/deps xtel_install_npm_test_deps)");
        REQUIRE(line);
        port_ = std::stoi(line->substr(line->rfind(':') + 1));
    }

    /// The base URL an OTLP exporter is given (OTEL_EXPORTER_OTLP_ENDPOINT).
    std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }

    /// One of its record files (points.txt, spans.jsonl, requests.jsonl, attempts.txt...).
    std::string file(std::string_view name) const {
        return xtel_test::read_file(dir_ / std::string(name));
    }

  private:
    std::filesystem::path dir_;
    int port_ = 0;
    std::optional<prom_it::child_process> process_;
};

}  // namespace otlp_it
