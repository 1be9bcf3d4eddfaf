#pragma once
// A real Prometheus server that takes remote writes, and the queries the tests ask it.

#include <httplib.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "prometheus_support.hpp"

namespace prom_it {

/// A Prometheus server on `port` that scrapes nothing and takes remote writes at /api/v1/write;
/// its log and data in `dir`; `flags` added to its command line
/// (--enable-feature=native-histograms to store native histograms).
struct prometheus_receiver {
    prometheus_receiver(const std::filesystem::path& dir,
                        std::uint16_t port,
                        std::vector<std::string> flags = {})
        : port(port), log(dir / "prometheus.log") {
        prom_it::write_file(dir / "prometheus.yml", "scrape_configs: []\n");
        std::vector<std::string> argv{XTEL_PROMETHEUS,
                                      "--config.file=" + (dir / "prometheus.yml").string(),
                                      "--storage.tsdb.path=" + (dir / "data").string(),
                                      fmt::format("--web.listen-address=127.0.0.1:{}", port),
                                      "--log.level=warn",
                                      "--web.enable-remote-write-receiver"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        server.emplace(spawn_options{std::move(argv), {}, {}, log});
    }

    /// `text` with every byte but [A-Za-z0-9_.~-] percent-encoded, for a query string.
    static std::string url_encoded(std::string_view text) {
        std::string out;
        for (const char c : text) {
            const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                               (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '~' ||
                               c == '-';
            out +=
                plain ? std::string(1, c) : fmt::format("%{:02X}", static_cast<unsigned char>(c));
        }
        return out;
    }

    /// The value of the first series `query` (PromQL) answers, asked until it is `expected` or 60 s
    /// pass; the last value seen.
    std::string query_until(const std::string& query, const std::string& expected) {
        httplib::Client api("127.0.0.1", port);
        api.set_connection_timeout(1);
        api.set_read_timeout(5);
        std::string last;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline && !server->exited()) {
            if (const auto res = api.Get("/api/v1/query?query=" + url_encoded(query));
                res && res->status == 200) {
                last = prom_it::first_value(res->body);
                if (last == expected) {
                    break;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        return last;
    }

    /// The body of the instant query `query` (PromQL) asked until `done(body)` or 60 s pass;
    /// the last body seen.
    template <class Done>
    std::string query_body_until(const std::string& query, Done&& done) {
        httplib::Client api("127.0.0.1", port);
        api.set_connection_timeout(1);
        api.set_read_timeout(5);
        std::string last;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline && !server->exited()) {
            if (const auto res = api.Get("/api/v1/query?query=" + url_encoded(query));
                res && res->status == 200) {
                last = res->body;
                if (done(last)) {
                    break;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        return last;
    }

    std::string url() const { return fmt::format("http://127.0.0.1:{}/api/v1/write", port); }

    std::uint16_t port;
    std::filesystem::path log;
    std::optional<child_process> server;
};

}  // namespace prom_it
