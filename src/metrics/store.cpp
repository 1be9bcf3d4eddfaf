#include "xtel/metrics/metric_store.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace xtel::metrics {

namespace {

bool is_metric_name(std::string_view s) {
    const auto head = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    };
    return !s.empty() && head(s[0]) && std::all_of(s.begin(), s.end(), [&](char c) {
        return head(c) || (c >= '0' && c <= '9');
    });
}

bool is_label_name(std::string_view s) {
    const auto head = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    return !s.empty() && !s.starts_with("__") && head(s[0]) &&
           std::all_of(s.begin(), s.end(),
                       [&](char c) { return head(c) || (c >= '0' && c <= '9'); });
}

/// Length-prefixed, so no label value can make two label sets encode alike.
void encode(std::string& out, std::span<const std::string_view> values) {
    out.clear();
    for (const auto v : values) {
        const auto n = static_cast<std::uint32_t>(v.size());
        out.append(reinterpret_cast<const char*>(&n), sizeof n);
        out.append(v);
    }
}

}  // namespace

metric_store::metric_store(store_options opts) : opts_(std::move(opts)) {
    if (opts_.max_series == 0) {
        throw metrics_error(
            "a metric store's max_series of 0 is invalid: expected at least 1 series per family");
    }
    family folded;
    folded.spec_ = {std::string(folded_family),
                    "Updates folded into a family's overflow series (its labels \"other\") "
                    "because the family had reached its limit of series.",
                    metric_type::counter,
                    {"family"}};
    families_.push_back(std::move(folded));
}

family_id metric_store::add_family(family_spec spec) {
    for (std::size_t i = 0; i < families_.size(); ++i) {
        if (families_[i].spec_.name != spec.name) {
            continue;
        }
        if (families_[i].spec_ == spec) {
            return static_cast<family_id>(i);
        }
        throw metrics_error(fmt::format(
            "metric family '{}' is already defined as a {} with labels [{}]: expected one "
            "definition per name",
            spec.name, to_string(families_[i].spec_.type),
            fmt::format("{}", fmt::join(families_[i].spec_.label_names, ","))));
    }
    if (!is_metric_name(spec.name)) {
        throw metrics_error(fmt::format(
            "metric family name '{}' is invalid: expected [a-zA-Z_:][a-zA-Z0-9_:]*", spec.name));
    }
    if (spec.decimals > 18) {
        throw metrics_error(fmt::format(
            "metric family '{}' has {} decimals: expected 0 to 18 (a 64-bit value's digits)",
            spec.name, spec.decimals));
    }
    if (spec.type == metric_type::counter && !spec.name.ends_with("_total")) {
        throw metrics_error(fmt::format(
            "counter family name '{}' is invalid: expected a name ending in _total", spec.name));
    }
    for (std::size_t i = 0; i < spec.label_names.size(); ++i) {
        const auto& l = spec.label_names[i];
        if (!is_label_name(l)) {
            throw metrics_error(fmt::format(
                "label '{}' of metric family '{}' is invalid: expected [a-zA-Z_][a-zA-Z0-9_]* not "
                "starting with \"__\"",
                l, spec.name));
        }
        if (std::find(spec.label_names.begin(), spec.label_names.begin() + i, l) !=
            spec.label_names.begin() + i) {
            throw metrics_error(fmt::format(
                "label '{}' of metric family '{}' is repeated: expected each label once", l,
                spec.name));
        }
        if (std::find(opts_.reserved_labels.begin(), opts_.reserved_labels.end(), l) !=
            opts_.reserved_labels.end()) {
            throw metrics_error(fmt::format(
                "label '{}' of metric family '{}' is reserved: the exporter adds it to every "
                "series ({})",
                l, spec.name, fmt::join(opts_.reserved_labels, ", ")));
        }
    }
    if (opts_.check) {
        opts_.check(spec);
    }
    const auto id = static_cast<family_id>(families_.size());
    family f;
    f.spec_ = std::move(spec);
    const bool can_fold = !f.spec_.label_names.empty();
    const std::string name = f.spec_.name;
    families_.push_back(std::move(f));
    if (can_fold) {
        // The folded-updates series exists from the start, at 0, so an alert on its increase
        // has a series to watch.
        const std::string_view v[] = {name};
        families_[id].folded_series_ =
            static_cast<std::uint32_t>(&find_or_make(0, v) - families_[0].series_.data());
    }
    ++changes_;
    return id;
}

series& metric_store::find_or_make(family_id id, std::span<const std::string_view> values) {
    if (id >= families_.size()) {
        throw metrics_error(fmt::format("metric family id {} is invalid: the store has {} families",
                                        id, families_.size()));
    }
    family& f = families_[id];
    if (values.size() != f.spec_.label_names.size()) {
        throw metrics_error(fmt::format(
            "metric family '{}' was given {} label values: expected {}, for [{}]", f.spec_.name,
            values.size(), f.spec_.label_names.size(), fmt::join(f.spec_.label_names, ",")));
    }
    encode(key_, values);
    if (const auto it = f.index_.find(key_); it != f.index_.end()) {
        return f.series_[it->second];
    }
    // The folded-updates family itself never folds: it has one series per family.
    const std::size_t made = f.series_.size() - (f.overflow_ != family::none ? 1 : 0);
    if (id != 0 && made >= opts_.max_series) {
        ++f.folded_;
        if (f.folded_series_ != family::none) {
            ++families_[0].series_[f.folded_series_].value;
        }
        if (f.overflow_ == family::none) {
            f.overflow_ = static_cast<std::uint32_t>(f.series_.size());
            series& o = f.series_.emplace_back();
            o.label_values.assign(values.size(), std::string(overflow_value));
        }
        return f.series_[f.overflow_];
    }
    const auto index = static_cast<std::uint32_t>(f.series_.size());
    series& s = f.series_.emplace_back();
    s.label_values.assign(values.begin(), values.end());
    f.index_.emplace(key_, index);
    return s;
}

void metric_store::add(family_id f, std::span<const std::string_view> values, std::uint64_t delta) {
    find_or_make(f, values).value += delta;
    ++changes_;
}

void metric_store::set(family_id f, std::span<const std::string_view> values, std::uint64_t value) {
    find_or_make(f, values).value = value;
    ++changes_;
}

const family* metric_store::find(std::string_view name) const noexcept {
    for (const family& f : families_) {
        if (f.spec_.name == name) {
            return &f;
        }
    }
    return nullptr;
}

std::optional<std::uint64_t> metric_store::value(
    std::string_view family_name, std::initializer_list<std::string_view> values) const {
    const family* f = find(family_name);
    if (f == nullptr || values.size() != f->spec_.label_names.size()) {
        return std::nullopt;
    }
    for (const series& s : f->series_) {
        if (std::equal(s.label_values.begin(), s.label_values.end(), values.begin())) {
            return s.value;
        }
    }
    return std::nullopt;
}

}  // namespace xtel::metrics
