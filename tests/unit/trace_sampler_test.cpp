// Which transfers become spans: failed ones, slow ones, a head-sampled fraction decided from the
// trace id, within a budget of spans per second whose overflow is counted; and the variables
// that set them.

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/trace/sampler.hpp"

namespace trace_sampler_test {

namespace tr = xtel::trace;

namespace {

std::string error_of(const std::string& var, const std::string& value) {
    try {
        (void)tr::sampler_settings::from_env(xtel_test::env_table({{var, value}}));
    } catch (const xtel::config_error& e) {
        return e.what();
    }
    return "no error";
}

/// A trace id whose last 7 bytes (the sampling value) are `r`, big-endian.
tr::trace_id trace_with_value(std::uint64_t r) {
    tr::trace_id t{};
    t[0] = 1;
    for (int i = 0; i < 7; ++i) {
        t[15 - i] = static_cast<std::uint8_t>(r >> (8 * i));
    }
    return t;
}

tr::sampler_settings settings(std::uint64_t slow_us, double sample, std::uint64_t budget) {
    tr::sampler_settings s;
    s.slow_us = slow_us;
    s.sample = sample;
    s.budget = budget;
    return s;
}

const tr::trace_id some_trace = tr::derive_trace_id("req-42");

}  // namespace

TEST_CASE("unset trace variables keep the documented defaults", "[trace_sampler]") {
    const auto s = tr::sampler_settings::from_env(xtel_test::env_table({}));
    CHECK(s.slow_us == 10'000);
    CHECK(s.sample == 0.01);
    CHECK(s.budget == 1000);
}

TEST_CASE("the trace variables are read", "[trace_sampler]") {
    const auto s = tr::sampler_settings::from_env(
        xtel_test::env_table({{"NIXL_TELEMETRY_TRACE_SLOW_US", "0"},
                              {"NIXL_TELEMETRY_TRACE_SAMPLE", ".25"},
                              {"NIXL_TELEMETRY_TRACE_BUDGET", "7"}}));
    CHECK(s.slow_us == 0);
    CHECK(s.sample == 0.25);
    CHECK(s.budget == 7);
    CHECK(
        tr::sampler_settings::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_TRACE_SAMPLE", "1"}}))
            .sample == 1.0);
}

TEST_CASE("a sample fraction outside 0 to 1 or not in decimal digits is refused by name",
          "[trace_sampler]") {
    for (const char* bad : {"1.5", "-0.1", "abc", "1e-3", "", "0.1.2", " 0.1", "nan", "."}) {
        INFO(bad);
        const auto msg = error_of("NIXL_TELEMETRY_TRACE_SAMPLE", bad);
        CHECK(msg == std::string("NIXL_TELEMETRY_TRACE_SAMPLE='") + bad +
                         "' is invalid: expected a fraction from 0 to 1 in decimal digits "
                         "(0.01: one trace in a hundred)");
    }
}

TEST_CASE(
    "a budget of 0 turns spans off; one over the largest or a threshold with a unit is "
    "refused by name",
    "[trace_sampler]") {
    CHECK(
        tr::sampler_settings::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_TRACE_BUDGET", "0"}}))
            .budget == 0);
    CHECK_FALSE(
        tr::sampler_settings::from_env(xtel_test::env_table({{"NIXL_TELEMETRY_TRACE_BUDGET", "0"}}))
            .spans());
    CHECK(tr::sampler_settings{}.spans());
    CHECK_THAT(error_of("NIXL_TELEMETRY_TRACE_BUDGET", "1000001"),
               Catch::StartsWith("NIXL_TELEMETRY_TRACE_BUDGET='1000001' is invalid"));
    CHECK_THAT(error_of("NIXL_TELEMETRY_TRACE_SLOW_US", "10ms"),
               Catch::StartsWith("NIXL_TELEMETRY_TRACE_SLOW_US='10ms' is invalid"));
}

TEST_CASE("a failed transfer becomes a span however fast and unsampled", "[trace_sampler]") {
    const tr::sampler s(settings(10'000, 0.0, 10), 0);
    CHECK(s.reason(true, 1, some_trace) == tr::span_reason::failed);
    CHECK(s.reason(true, std::nullopt, some_trace) == tr::span_reason::failed);
}

TEST_CASE("a timed transfer at or above the threshold is slow, one below it is not",
          "[trace_sampler]") {
    const tr::sampler s(settings(500, 0.0, 10), 0);
    CHECK(s.reason(false, 500, some_trace) == tr::span_reason::slow);
    CHECK(s.reason(false, 499, some_trace) == tr::span_reason::none);
    // An untimed transfer has no duration to be slow by.
    CHECK(s.reason(false, std::nullopt, some_trace) == tr::span_reason::none);
    const tr::sampler every(settings(0, 0.0, 10), 0);
    CHECK(every.reason(false, 0, some_trace) == tr::span_reason::slow);
}

TEST_CASE("the sampling threshold is OpenTelemetry's rejection threshold", "[trace_sampler]") {
    constexpr std::uint64_t two_56 = std::uint64_t{1} << 56;
    CHECK(tr::sample_threshold(0.0) == two_56);
    CHECK(tr::sample_threshold(1.0) == 0);
    CHECK(tr::sample_threshold(0.5) == two_56 / 2);
    CHECK(tr::sample_threshold(0.25) == two_56 / 4 * 3);
}

TEST_CASE("a trace is sampled when its last 7 bytes reach the threshold", "[trace_sampler]") {
    const std::uint64_t t = tr::sample_threshold(0.5);
    CHECK(tr::head_sampled(trace_with_value(t), t));
    CHECK_FALSE(tr::head_sampled(trace_with_value(t - 1), t));
    // The first 9 bytes play no part.
    auto high = trace_with_value(t - 1);
    high[8] = 0xff;
    CHECK_FALSE(tr::head_sampled(high, t));
    CHECK(tr::head_sampled(trace_with_value(0), 0));
    CHECK_FALSE(tr::head_sampled(trace_with_value((std::uint64_t{1} << 56) - 1),
                                 tr::sample_threshold(0.0)));
}

TEST_CASE("two samplers with one fraction decide alike for every trace", "[trace_sampler]") {
    // The prefill and the decode side: neither talks to the other.
    const tr::sampler prefill(settings(10'000, 0.3, 10), 0);
    const tr::sampler decode(settings(10'000, 0.3, 10), 12345);
    int sampled = 0;
    for (int i = 0; i < 20000; ++i) {
        const auto t = tr::derive_trace_id("request-" + std::to_string(i));
        const auto a = prefill.reason(false, 1, t);
        CHECK(a == decode.reason(false, 1, t));
        sampled += a == tr::span_reason::sampled;
    }
    // Derived ids are uniform: 30 % of 20000 within 5 standard deviations (about 324).
    CHECK(sampled > 6000 - 324);
    CHECK(sampled < 6000 + 324);
}

TEST_CASE("the budget admits a second's worth at once, then one per refill", "[trace_sampler]") {
    tr::sampler s(settings(0, 0.0, 10), 1'000'000);
    for (int i = 0; i < 10; ++i) {
        CHECK(s.decide(false, 1, some_trace, 1'000'000) == tr::span_reason::slow);
    }
    CHECK(s.decide(true, 1, some_trace, 1'000'000) == tr::span_reason::none);
    CHECK(s.dropped() == 1);
    // Ten a second: one token every 100 ms.
    CHECK(s.decide(false, 1, some_trace, 1'099'999) == tr::span_reason::none);
    CHECK(s.dropped() == 2);
    CHECK(s.decide(true, 1, some_trace, 1'100'000) == tr::span_reason::failed);
    CHECK(s.decide(true, 1, some_trace, 1'100'000) == tr::span_reason::none);
    CHECK(s.dropped() == 3);
    CHECK(s.kept(tr::span_reason::slow) == 10);
    CHECK(s.kept(tr::span_reason::failed) == 1);
}

TEST_CASE("a quiet spell refills the budget to one second's worth, no more", "[trace_sampler]") {
    tr::sampler s(settings(0, 0.0, 3), 0);
    for (int i = 0; i < 3; ++i) {
        CHECK(s.decide(false, 1, some_trace, 0) == tr::span_reason::slow);
    }
    const std::uint64_t later = 3'600'000'000;  // an hour
    int admitted = 0;
    for (int i = 0; i < 10; ++i) {
        admitted += s.decide(false, 1, some_trace, later) != tr::span_reason::none;
    }
    CHECK(admitted == 3);
    CHECK(s.dropped() == 7);
}

TEST_CASE("a transfer with no reason takes nothing from the budget", "[trace_sampler]") {
    tr::sampler s(settings(1000, 0.0, 1), 0);
    CHECK(s.decide(false, 10, some_trace, 0) == tr::span_reason::none);
    CHECK(s.dropped() == 0);
    CHECK(s.decide(false, 1000, some_trace, 0) == tr::span_reason::slow);
}

}  // namespace trace_sampler_test
