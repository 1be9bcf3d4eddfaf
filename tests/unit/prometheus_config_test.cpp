#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/prometheus_settings.hpp"
#include "xtel/metrics/agent_metrics_settings.hpp"

namespace prometheus_config_test {

using xtel::host_port;
using xtel::prometheus_settings;
using xtel::metrics::agent_metrics_settings;

namespace {

/// The message of the config_error `f` throws; empty when it throws nothing.
template <class F>
std::string config_error_of(F&& f) {
    try {
        f();
    } catch (const xtel::config_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("a Prometheus address is host:port, [ipv6]:port or a bare port") {
    CHECK(host_port::parse("V", "127.0.0.1:9000") == host_port{"127.0.0.1", 9000});
    CHECK(host_port::parse("V", "localhost:0") == host_port{"localhost", 0});
    CHECK(host_port::parse("V", "0.0.0.0:65535") == host_port{"0.0.0.0", 65535});
    CHECK(host_port::parse("V", "[::1]:9464") == host_port{"::1", 9464});
    CHECK(host_port::parse("V", "8080") == host_port{"127.0.0.1", 8080});
}

TEST_CASE("a Prometheus address prints as it is written") {
    CHECK(host_port{"127.0.0.1", 9464}.to_string() == "127.0.0.1:9464");
    CHECK(host_port{"::1", 9464}.to_string() == "[::1]:9464");
}

TEST_CASE(
    "a malformed Prometheus address is a config_error naming the value and what is accepted") {
    for (const char* bad :
         {"", "abc", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:12a", "[::1]",
          "[::1]9464", "[]:1", "::1:9464", "host name:1", "-host:1", "1.2.3.4:123456"}) {
        INFO("value: '" << bad << "'");
        const auto what = config_error_of([&] { host_port::parse("SOME_VAR", bad); });
        CHECK(what.find(std::string("SOME_VAR='") + bad + "' is invalid") != std::string::npos);
        CHECK(what.find("expected host:port") != std::string::npos);
    }
}

TEST_CASE("an address without a host before the colon is refused rather than opened to all") {
    const auto what = config_error_of([] { host_port::parse("V", ":9464"); });
    CHECK(what.find("a host is needed") != std::string::npos);
    // The choices with the value's own port, each said once.
    CHECK(what.find("'9464' listens on 127.0.0.1, '0.0.0.0:9464' on every interface") !=
          std::string::npos);
    CHECK(what.find("127.0.0.1") == what.rfind("127.0.0.1"));
    CHECK(what.find("bare port") == std::string::npos);
}

TEST_CASE("the Prometheus address defaults to 127.0.0.1:9464") {
    const auto s = prometheus_settings::from_env(xtel_test::enabled_config({"prometheus"}),
                                                 xtel_test::env_table({}));
    CHECK(s.address == host_port{"127.0.0.1", 9464});
}

TEST_CASE("the metric model's bounds default to NIXL's, and its hostname to this machine's") {
    const auto s = agent_metrics_settings::from_env(xtel_test::env_table({}));
    CHECK(s.buckets == agent_metrics_settings::default_buckets());
    CHECK_FALSE(s.hostname.empty());
}

TEST_CASE("the output path is the Prometheus address when buffer is not named") {
    const auto s = prometheus_settings::from_env(
        xtel_test::enabled_config({"prometheus"}, "127.0.0.1:0"), xtel_test::env_table({}));
    CHECK(s.address == host_port{"127.0.0.1", 0});
}

TEST_CASE("with buffer named the output path is buffer's directory, not the address") {
    const auto s = prometheus_settings::from_env(
        xtel_test::enabled_config({"buffer", "prometheus"}, "flight-recorder-dir"),
        xtel_test::env_table({}));
    CHECK(s.address == host_port{"127.0.0.1", 9464});
}

TEST_CASE("NIXL_TELEMETRY_PROMETHEUS_ADDRESS takes precedence over the output path") {
    const auto s = prometheus_settings::from_env(
        xtel_test::enabled_config({"prometheus"}, "127.0.0.1:1"),
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "localhost:2"}}));
    CHECK(s.address == host_port{"localhost", 2});
}

TEST_CASE("a malformed output path for prometheus names NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH") {
    const auto what = config_error_of([] {
        prometheus_settings::from_env(xtel_test::enabled_config({"prometheus"}, "/dev/shm"),
                                      xtel_test::env_table({}));
    });
    CHECK(what.find("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH='/dev/shm' is invalid") !=
          std::string::npos);
}

TEST_CASE("NIXL_TELEMETRY_PROMETHEUS_BUCKETS sets the histogram bounds") {
    const auto s = agent_metrics_settings::from_env(
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_BUCKETS", "0, 2.5,10 ,1e3"}}));
    CHECK(s.buckets == std::vector<double>{0, 2.5, 10, 1000});
}

TEST_CASE("malformed buckets are a config_error naming the value and what is accepted") {
    std::string too_many;
    for (int i = 1; i <= 65; ++i) {
        too_many += (i > 1 ? "," : "") + std::to_string(i);
    }
    for (const std::string& bad : std::vector<std::string>{
             "", "a", "10,5", "10,10", "-1", "inf", "nan", "1,,2", "1,", "0x10", "5us", too_many}) {
        INFO("value: '" << bad << "'");
        const auto what = config_error_of([&] {
            agent_metrics_settings::from_env(
                xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_BUCKETS", bad}}));
        });
        CHECK(what.find("NIXL_TELEMETRY_PROMETHEUS_BUCKETS='" + bad + "' is invalid") !=
              std::string::npos);
        CHECK(what.find("greater than the one before") != std::string::npos);
    }
}

TEST_CASE(
    "NIXL's _PROMETHEUS_PORT with _PROMETHEUS_LOCAL=n listens on the port on every interface") {
    const auto s = prometheus_settings::from_env(
        xtel_test::enabled_config({"prometheus"}),
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_PORT", "9090"},
                              {"NIXL_TELEMETRY_PROMETHEUS_LOCAL", "n"}}));
    CHECK(s.address == host_port{"0.0.0.0", 9090});
}

TEST_CASE("NIXL's _PROMETHEUS_LOCAL=y listens on loopback, on the port _PROMETHEUS_PORT gives") {
    const xtel_test::log_capture log;
    const auto s = prometheus_settings::from_env(
        xtel_test::enabled_config({"prometheus"}),
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_PORT", "9091"},
                              {"NIXL_TELEMETRY_PROMETHEUS_LOCAL", "enable"}}));
    CHECK(s.address == host_port{"127.0.0.1", 9091});
    CHECK(log.all().empty());
}

TEST_CASE(
    "NIXL's _PROMETHEUS_PORT alone keeps loopback and says how to listen on every interface") {
    const xtel_test::log_capture log;
    const auto s = prometheus_settings::from_env(
        xtel_test::enabled_config({"prometheus"}),
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_PORT", "9090"}}));
    CHECK(s.address == host_port{"127.0.0.1", 9090});
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "NIXL_TELEMETRY_PROMETHEUS_PORT='9090' without NIXL_TELEMETRY_PROMETHEUS_LOCAL: "
          "listening on 127.0.0.1:9090, not on every interface as NIXL would; set "
          "NIXL_TELEMETRY_PROMETHEUS_LOCAL=n to listen on every interface");
}

TEST_CASE("an address that NIXL's _PROMETHEUS_PORT or _LOCAL contradict is refused naming both") {
    const auto agreeing = prometheus_settings::from_env(
        xtel_test::enabled_config({"prometheus"}),
        xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "0.0.0.0:9090"},
                              {"NIXL_TELEMETRY_PROMETHEUS_PORT", "9090"},
                              {"NIXL_TELEMETRY_PROMETHEUS_LOCAL", "off"}}));
    CHECK(agreeing.address == host_port{"0.0.0.0", 9090});
    CHECK(config_error_of([] {
              prometheus_settings::from_env(
                  xtel_test::enabled_config({"prometheus"}),
                  xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "127.0.0.1:9464"},
                                        {"NIXL_TELEMETRY_PROMETHEUS_PORT", "9090"},
                                        {"NIXL_TELEMETRY_PROMETHEUS_LOCAL", "n"}}));
          }) ==
          "NIXL_TELEMETRY_PROMETHEUS_ADDRESS='127.0.0.1:9464' is invalid: it disagrees with "
          "NIXL_TELEMETRY_PROMETHEUS_PORT='9090' and NIXL_TELEMETRY_PROMETHEUS_LOCAL='n'; set "
          "NIXL_TELEMETRY_PROMETHEUS_ADDRESS or NIXL's variables, not both, or make them agree");
}

TEST_CASE(
    "a malformed NIXL _PROMETHEUS_PORT or _PROMETHEUS_LOCAL is refused with what is accepted") {
    CHECK(config_error_of([] {
              prometheus_settings::from_env(
                  xtel_test::enabled_config({"prometheus"}),
                  xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_PORT", "65536"}}));
          }) ==
          "NIXL_TELEMETRY_PROMETHEUS_PORT='65536' is invalid: expected a whole number from "
          "0 to 65535");
    CHECK(config_error_of([] {
              prometheus_settings::from_env(
                  xtel_test::enabled_config({"prometheus"}),
                  xtel_test::env_table({{"NIXL_TELEMETRY_PROMETHEUS_LOCAL", "local"}}));
          }).starts_with("NIXL_TELEMETRY_PROMETHEUS_LOCAL='local' is invalid: expected one of"));
}

TEST_CASE("NIXL_TELEMETRY_DIR is never taken as the Prometheus address") {
    const auto cfg =
        xtel::config::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_ENABLE", "y"},
                                                     {"NIXL_TELEMETRY_EXPORTER", "prometheus"},
                                                     {"NIXL_TELEMETRY_DIR", "/dev/shm"}}));
    const auto s = prometheus_settings::from_env(cfg, xtel_test::env_table({}));
    CHECK(s.address == host_port{"127.0.0.1", 9464});
}

}  // namespace prometheus_config_test
