// The metric model's settings: the histogram bounds, builders, series limit, host name, rank.
#include "xtel/metrics/agent_metrics_settings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>
#include <unistd.h>

#include <limits.h>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/suggest.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace xtel::metrics {

namespace {

std::string this_host_name() {
    char buf[HOST_NAME_MAX + 1] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') {
        return "unknown";
    }
    return buf;
}

/// Whether one of `globs` names a metric of the NIXL set.
bool names_nixl_metric(const std::vector<std::string>& globs) {
    return std::any_of(globs.begin(), globs.end(), [](const std::string& g) {
        return std::any_of(std::begin(nixl_metric_names), std::end(nixl_metric_names),
                           [&](std::string_view n) { return glob_matches(g, n); });
    });
}

}  // namespace

bool glob_matches(std::string_view pattern, std::string_view name) {
    return ::fnmatch(std::string(pattern).c_str(), std::string(name).c_str(), 0) == 0;
}

std::vector<double> agent_metrics_settings::default_buckets() {
    return {10,    25,    50,    100,    250,    500,    1000,    2500,    5000,
            10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000, 10000000};
}

std::vector<double> agent_metrics_settings::parse_buckets(std::string_view var,
                                                          std::string_view value) {
    const auto accepted = fmt::format(
        "expected 1 to {} comma-separated bucket upper bounds in microseconds, each a finite "
        "number not below 0 and greater than the one before (for example 10,100,1000); +Inf "
        "is always added",
        max_buckets);
    // A repeated bound is refused by the order check, with the same message.
    const auto items = parse::comma_list(var, value, accepted, parse::repeats::allowed);
    if (items.size() > max_buckets) {
        parse::fail(var, value, accepted);
    }
    std::vector<double> out;
    for (const auto item : items) {
        double b = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), b);
        if (ec != std::errc{} || ptr != item.data() + item.size() || !std::isfinite(b) || b < 0 ||
            (!out.empty() && b <= out.back())) {
            parse::fail(var, value, accepted);
        }
        out.push_back(b);
    }
    return out;
}

std::string_view to_string(family_sets s) noexcept {
    switch (s) {
        case family_sets::xtel:
            return "xtel";
        case family_sets::nixl:
            return "nixl";
        case family_sets::both:
            return "both";
    }
    return "xtel";
}

std::string_view to_string(histogram_kind k) noexcept {
    switch (k) {
        case histogram_kind::classic:
            return "classic";
        case histogram_kind::native:
            return "native";
        case histogram_kind::both:
            return "both";
    }
    return "classic";
}

histogram_kind agent_metrics_settings::parse_histogram_kind(std::string_view var,
                                                            std::string_view value) {
    for (const histogram_kind k :
         {histogram_kind::classic, histogram_kind::native, histogram_kind::both}) {
        if (detail::same_keyword(parse::trim(value), to_string(k))) {
            return k;
        }
    }
    parse::fail(var, value,
                "expected classic (the bucket bounds of NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US), "
                "native (exponential buckets: Prometheus native histograms, OTLP exponential "
                "histograms) or both");
}

latency_shape agent_metrics_settings::latency() const {
    latency_shape out;
    if (histograms != histogram_kind::native) {
        out.bounds = buckets;
    }
    out.native = histograms != histogram_kind::classic;
    out.native_schema = static_cast<std::int8_t>(histogram_schema);
    return out;
}

std::vector<std::string> agent_metrics_settings::default_builders(family_sets s) {
    std::vector<std::string> out;
    if (has(s, family_sets::nixl)) {
        out.emplace_back("legacy");
    }
    if (has(s, family_sets::xtel)) {
        out.emplace_back("comprehensive");
    }
    return out;
}

family_sets agent_metrics_settings::parse_sets(std::string_view var, std::string_view value) {
    for (const family_sets s : {family_sets::xtel, family_sets::nixl, family_sets::both}) {
        if (detail::same_keyword(parse::trim(value), to_string(s))) {
            return s;
        }
    }
    parse::fail(var, value,
                "expected xtel (xtel's families: base units, operation and remote_agent labels), "
                "nixl (upstream NIXL's names) or both");
}

std::vector<std::string> agent_metrics_settings::parse_enabled_metrics(std::string_view var,
                                                                       std::string_view value) {
    std::vector<std::string> out;
    std::string_view rest = value;
    while (true) {
        const auto comma = rest.find(',');
        const std::string_view item = parse::trim(rest.substr(0, comma));
        if (!item.empty()) {
            const bool valid = std::all_of(item.begin(), item.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == ':' || c == '*' || c == '?' || c == '[' || c == ']' ||
                       c == '!' || c == '-';
            });
            if (!valid) {
                parse::fail(var, value,
                            "expected metric names or globs of them (letters, digits, _, :, and "
                            "*, ?, [...]) separated by commas, for example "
                            "agent_tx_bytes,agent_err_*");
            }
            out.emplace_back(item);
        }
        if (comma == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(comma + 1);
    }
    return out;
}

std::vector<std::string> agent_metrics_settings::parse_builders(std::string_view var,
                                                                std::string_view value) {
    const auto accepted = fmt::format(
        "expected builder names separated by commas, each at most once, from {} (for example "
        "legacy,comprehensive), or none for no transfer series",
        fmt::join(known_builders, ", "));
    if (parse::trim(value) == "none") {
        return {};
    }
    std::vector<std::string> out;
    for (const auto item : parse::comma_list(var, value, accepted, parse::repeats::refused)) {
        if (std::find(std::begin(known_builders), std::end(known_builders), item) ==
            std::end(known_builders)) {
            parse::fail(var, value, accepted);
        }
        out.emplace_back(item);
    }
    return out;
}

agent_metrics_settings agent_metrics_settings::from_env(const env_lookup& lookup) {
    agent_metrics_settings s;
    s.hostname = this_host_name();
    // Upstream: an empty value is the defaults.
    if (const auto v = lookup(env::histogram_buckets_us); v && !parse::trim(*v).empty()) {
        s.buckets = parse_buckets(env::histogram_buckets_us, *v);
    } else if (const auto v = lookup(env::prometheus_buckets)) {
        s.buckets = parse_buckets(env::prometheus_buckets, *v);
    }
    if (const auto v = lookup(env::histogram_kind)) {
        s.histograms = parse_histogram_kind(env::histogram_kind, *v);
    }
    if (const auto v = lookup(env::histogram_schema)) {
        const std::string_view t = parse::trim(*v);
        int schema = 0;
        const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), schema);
        if (t.empty() || ec != std::errc{} || ptr != t.data() + t.size() ||
            schema < native::min_schema || schema > native::max_schema) {
            parse::fail(env::histogram_schema, *v,
                        fmt::format("expected an integer from {} to {} (2^schema native buckets "
                                    "per power of two; 3 is 8 buckets, at most 4.3% off)",
                                    native::min_schema, native::max_schema));
        }
        s.histogram_schema = schema;
    }
    if (const auto v = lookup(env::enabled_metrics)) {
        s.enabled_metrics = parse_enabled_metrics(env::enabled_metrics, *v);
    }
    if (const auto v = lookup(env::metric_set)) {
        s.sets = parse_sets(env::metric_set, *v);
    } else if (names_nixl_metric(s.enabled_metrics)) {
        s.sets = family_sets::both;
    }
    if (const auto v = lookup(env::prometheus_builders)) {
        s.builders = parse_builders(env::prometheus_builders, *v);
    }
    if (const auto v = lookup(env::prometheus_max_series)) {
        s.max_series = parse::unsigned_integer(env::prometheus_max_series, *v, 1, max_max_series);
    }
    if (const auto v = lookup(env::compat_names)) {
        s.compat_names = parse::boolean(env::compat_names, *v);
    }
    s.rank = process_rank::from_env(lookup);
    return s;
}

}  // namespace xtel::metrics
