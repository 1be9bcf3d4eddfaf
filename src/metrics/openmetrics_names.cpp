#include "xtel/metrics/openmetrics_names.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace xtel::metrics {

namespace {

/// The suffixes whose names an OpenMetrics family of type `t` claims, as its parsers check.
std::span<const std::string_view> suffixes_of(metric_type t) noexcept {
    static constexpr std::string_view counter[] = {"", "_total", "_created"};
    static constexpr std::string_view gauge[] = {""};
    static constexpr std::string_view histogram[] = {"", "_bucket", "_count", "_sum", "_created"};
    static constexpr std::string_view summary[] = {"", "_count", "_sum", "_created"};
    switch (t) {
        case metric_type::counter:
            return counter;
        case metric_type::gauge:
            return gauge;
        case metric_type::histogram:
            return histogram;
        case metric_type::summary:
            return summary;
    }
    return gauge;
}

constexpr std::string_view bare[] = {""};

}  // namespace

std::string_view openmetrics_family_name(std::string_view name, metric_type type) noexcept {
    if (type == metric_type::counter && name.ends_with("_total")) {
        name.remove_suffix(std::string_view("_total").size());
    }
    return name;
}

std::vector<std::string> openmetrics_candidates(std::string_view name, metric_type type) {
    const std::string_view base = openmetrics_family_name(name, type);
    std::vector<std::string> out;
    for (const std::string_view suffix : suffixes_of(type)) {
        out.emplace_back(base).append(suffix);
    }
    if (type == metric_type::counter && base != name) {
        out.emplace_back(name);
    }
    return out;
}

bool openmetrics_claims::free(std::string_view base,
                              std::span<const std::string_view> suffixes) const {
    return std::none_of(suffixes.begin(), suffixes.end(), [&](std::string_view suffix) {
        std::string name(base);
        name += suffix;
        return claimed_.contains(name);
    });
}

openmetrics_form openmetrics_claims::claim(std::string_view name, metric_type type) {
    std::string_view base = openmetrics_family_name(name, type);
    std::span<const std::string_view> suffixes = suffixes_of(type);
    openmetrics_form form = openmetrics_form::typed;
    if (!free(base, suffixes)) {
        if (type != metric_type::counter || !free(name, bare)) {
            return openmetrics_form::left_out;
        }
        base = name;
        suffixes = bare;
        form = openmetrics_form::unknown;
    }
    for (const std::string_view suffix : suffixes) {
        scratch_.assign(base);
        scratch_ += suffix;
        claimed_.insert(scratch_);
    }
    return form;
}

std::optional<openmetrics_clash> find_openmetrics_clash(
    std::span<const std::pair<std::string_view, metric_type>> families) {
    std::vector<std::pair<std::string_view, metric_type>> sorted(families.begin(), families.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    openmetrics_claims claims;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        if (claims.claim(sorted[i].first, sorted[i].second) != openmetrics_form::left_out) {
            continue;
        }
        // The holder: an earlier family whose names alone leave this one out.
        for (std::size_t j = 0; j < i; ++j) {
            openmetrics_claims pair;
            pair.claim(sorted[j].first, sorted[j].second);
            if (pair.claim(sorted[i].first, sorted[i].second) == openmetrics_form::left_out) {
                return openmetrics_clash{std::string(sorted[i].first),
                                         std::string(sorted[j].first)};
            }
        }
        return openmetrics_clash{std::string(sorted[i].first), {}};
    }
    return std::nullopt;
}

}  // namespace xtel::metrics
