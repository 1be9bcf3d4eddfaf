// The metric model's settings: the histogram bounds, builders, series limit, host name, rank.
#include "xtel/metrics/agent_metrics_settings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <limits.h>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "xtel/core/parse.hpp"

namespace xtel::metrics {

namespace {

std::string this_host_name() {
    char buf[HOST_NAME_MAX + 1] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') {
        return "unknown";
    }
    return buf;
}

}  // namespace

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

std::vector<std::string> agent_metrics_settings::default_builders() {
    return {std::begin(known_builders), std::end(known_builders)};
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
    if (const auto v = lookup(env::histogram_buckets_us)) {
        s.buckets = parse_buckets(env::histogram_buckets_us, *v);
    } else if (const auto v = lookup(env::prometheus_buckets)) {
        s.buckets = parse_buckets(env::prometheus_buckets, *v);
    }
    if (const auto v = lookup(env::prometheus_builders)) {
        s.builders = parse_builders(env::prometheus_builders, *v);
    }
    if (const auto v = lookup(env::prometheus_max_series)) {
        s.max_series = parse::unsigned_integer(env::prometheus_max_series, *v, 1, max_max_series);
    }
    s.rank = process_rank::from_env(lookup);
    return s;
}

}  // namespace xtel::metrics
