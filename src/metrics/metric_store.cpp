#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/openmetrics_names.hpp"

namespace xtel::metrics {

namespace {

/// The bit width of each value where a family's bucket search starts: 0 for 0, else 1 to 64.
constexpr std::size_t widths = 65;

/// For each bit width w, the first of `bounds` not below the smallest value of that width
/// (2^(w-1); 0 for w = 0).
std::array<std::uint32_t, widths> bucket_starts(const std::vector<double>& bounds) {
    std::array<std::uint32_t, widths> out{};
    for (std::size_t w = 0; w < widths; ++w) {
        const double smallest = w == 0 ? 0.0 : std::ldexp(1.0, static_cast<int>(w) - 1);
        out[w] = static_cast<std::uint32_t>(
            std::lower_bound(bounds.begin(), bounds.end(), smallest) - bounds.begin());
    }
    return out;
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

bool takes_values(metric_type t) noexcept {
    return t == metric_type::counter || t == metric_type::gauge;
}

/// Halves `s`'s native resolution: each pair of buckets becomes one.
void downscale(series& s) {
    std::vector<std::uint64_t> merged;
    s.native_first = native::downscale_into(s.native_first, s.native_buckets, 1, merged);
    s.native_buckets = std::move(merged);
    --s.native_schema;
}

/// Counts `value` (as kept) in `s`'s native buckets.
void observe_native(series& s, std::uint64_t value, std::uint8_t decimals) {
    if (value == 0) {
        ++s.zero_count;
        return;
    }
    const double shown = shown_bound(static_cast<double>(value), decimals);
    std::int32_t index = native::bucket_index(shown, s.native_schema);
    if (s.native_buckets.empty()) {
        s.native_first = index;
        s.native_buckets.push_back(1);
        return;
    }
    const auto width = [&] {
        const std::int32_t last =
            s.native_first + static_cast<std::int32_t>(s.native_buckets.size()) - 1;
        return static_cast<std::size_t>(std::max(last, index) - std::min(s.native_first, index)) +
               1;
    };
    while (width() > native::max_buckets && s.native_schema > native::min_schema) {
        downscale(s);
        index = native::bucket_index(shown, s.native_schema);
    }
    if (index < s.native_first) {
        s.native_buckets.insert(s.native_buckets.begin(),
                                static_cast<std::size_t>(s.native_first - index), 0);
        s.native_first = index;
    } else if (const auto k = static_cast<std::size_t>(index - s.native_first);
               k >= s.native_buckets.size()) {
        s.native_buckets.resize(k + 1, 0);
    }
    ++s.native_buckets[static_cast<std::size_t>(index - s.native_first)];
}

/// What a family's spec must be on its own: its name, decimals, type, bounds and unit.
void check_spec(const family_spec& spec) {
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
    if (spec.type != metric_type::histogram && !spec.bounds.empty()) {
        throw metrics_error(fmt::format(
            "metric family '{}' is a {} with bucket bounds: expected bounds only for a histogram",
            spec.name, to_string(spec.type)));
    }
    if (spec.native &&
        (spec.type != metric_type::histogram || spec.native_schema < native::min_schema ||
         spec.native_schema > native::max_schema)) {
        throw metrics_error(fmt::format(
            "metric family '{}' is a {} with native buckets of schema {}: expected native "
            "buckets only for a histogram, of a schema from {} to {}",
            spec.name, to_string(spec.type), spec.native_schema, native::min_schema,
            native::max_schema));
    }
    for (std::size_t i = 0; i < spec.bounds.size(); ++i) {
        // Readers show each bound divided by 10^decimals, and add +Inf themselves.
        if (!std::isfinite(spec.bounds[i]) ||
            (i > 0 && !(shown_bound(spec.bounds[i], spec.decimals) >
                        shown_bound(spec.bounds[i - 1], spec.decimals)))) {
            throw metrics_error(fmt::format(
                "histogram family '{}' has bounds [{}]: expected strictly increasing bounds, "
                "finite, and still increasing divided by 10^{} (as they are shown)",
                spec.name, fmt::join(spec.bounds, ","), spec.decimals));
        }
    }
    if (!is_unit(spec.unit) ||
        (!spec.unit.empty() &&
         !unit_ends_name(spec.name, spec.unit, spec.type == metric_type::counter))) {
        throw metrics_error(fmt::format(
            "metric family '{}' has the unit '{}': expected [a-zA-Z0-9_]* that ends the name "
            "(_<unit>, before a counter's _total), or none",
            spec.name, spec.unit));
    }
}

/// Each label name valid for the family's type, given once, and none of `reserved` (those the
/// exporter adds to every series).
void check_label_names(const family_spec& spec, std::span<const std::string> reserved) {
    for (std::size_t i = 0; i < spec.label_names.size(); ++i) {
        const auto& l = spec.label_names[i];
        if (!is_label_name(l) || (spec.type == metric_type::histogram && l == "le") ||
            (spec.type == metric_type::summary && l == "quantile")) {
            throw metrics_error(fmt::format(
                "label '{}' of metric family '{}' is invalid: expected [a-zA-Z_][a-zA-Z0-9_]* not "
                "starting with \"__\" (and not le in a histogram, quantile in a summary)",
                l, spec.name));
        }
        if (std::find(spec.label_names.begin(), spec.label_names.begin() + i, l) !=
            spec.label_names.begin() + i) {
            throw metrics_error(fmt::format(
                "label '{}' of metric family '{}' is repeated: expected each label once", l,
                spec.name));
        }
        if (std::find(reserved.begin(), reserved.end(), l) != reserved.end()) {
            throw metrics_error(fmt::format(
                "label '{}' of metric family '{}' is reserved: the exporter adds it to every "
                "series ({})",
                l, spec.name, fmt::join(reserved, ", ")));
        }
    }
}

}  // namespace

std::vector<std::string> metric_store::line_names(std::string_view name, metric_type type) {
    const std::string n(name);
    switch (type) {
        case metric_type::counter:
        case metric_type::gauge:
            return {n};
        case metric_type::summary:
            return {n, n + "_sum", n + "_count"};
        case metric_type::histogram:
            return {n, n + "_bucket", n + "_sum", n + "_count"};
    }
    return {n};
}

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
    lines_.emplace(std::string(folded_family), 0);
    for (auto& n : openmetrics_candidates(folded_family, metric_type::counter)) {
        openmetrics_names_.insert(std::move(n));
    }
}

void metric_store::check_new(const family_spec& spec) const {
    check_spec(spec);
    check_label_names(spec, opts_.reserved_labels);
    // Then against the families already here: no line name twice, no OpenMetrics clash.
    for (const auto& line : line_names(spec.name, spec.type)) {
        if (const auto it = lines_.find(line); it != lines_.end()) {
            throw metrics_error(fmt::format(
                "metric family '{}' is refused: its line name '{}' is used by family '{}'; "
                "expected a name of its own",
                spec.name, line, families_[it->second].spec_.name));
        }
    }
    // OpenMetrics: refused here, where its author learns why, rather than left out of a body.
    const auto candidates = openmetrics_candidates(spec.name, spec.type);
    if (std::none_of(candidates.begin(), candidates.end(),
                     [&](const std::string& n) { return openmetrics_names_.contains(n); })) {
        return;
    }
    std::vector<std::pair<std::string_view, metric_type>> all;
    all.reserve(families_.size() + 1);
    for (const family& f : families_) {
        all.emplace_back(f.spec_.name, f.spec_.type);
    }
    all.emplace_back(spec.name, spec.type);
    if (const auto clash = find_openmetrics_clash(all)) {
        throw metrics_error(fmt::format(
            "metric family '{}' is refused: an OpenMetrics body would leave out '{}', whose "
            "names '{}' takes there; expected a name of its own",
            spec.name, clash->left_out, clash->holder));
    }
}

void metric_store::reserve_labels(std::span<const std::string_view> names) {
    std::vector<std::string> out(names.begin(), names.end());
    for (auto& l : opts_.reserved_labels) {
        if (std::find(out.begin(), out.end(), l) == out.end()) {
            out.push_back(std::move(l));
        }
    }
    opts_.reserved_labels = std::move(out);
}

family_id metric_store::add_family(family_spec spec) {
    if (opts_.check) {
        opts_.check(spec);
    }
    if (const auto id = id_of(spec.name)) {
        if (families_[*id].spec_ == spec) {
            return *id;
        }
        throw metrics_error(fmt::format(
            "metric family '{}' is already defined as a {} with labels [{}]: expected one "
            "definition per name",
            spec.name, to_string(families_[*id].spec_.type),
            fmt::format("{}", fmt::join(families_[*id].spec_.label_names, ","))));
    }
    check_new(spec);
    const auto id = static_cast<family_id>(families_.size());
    for (auto& line : line_names(spec.name, spec.type)) {
        lines_.emplace(std::move(line), id);
    }
    for (auto& n : openmetrics_candidates(spec.name, spec.type)) {
        openmetrics_names_.insert(std::move(n));
    }
    family f;
    f.spec_ = std::move(spec);
    f.bucket_start_ = bucket_starts(f.spec_.bounds);
    const bool can_fold = !f.spec_.label_names.empty() && !f.spec_.fixed_labels;
    const std::string name = f.spec_.name;
    families_.push_back(std::move(f));
    if (can_fold) {
        // The folded-updates series exists from the start, at 0, so an alert on its increase
        // has a series to watch.
        const std::string_view v[] = {name};
        families_[id].folded_series_ = series_of(0, v).index;
    }
    ++changes_;
    return id;
}

series_ref metric_store::series_of(family_id id, std::span<const std::string_view> values) {
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
        return {id, it->second};
    }
    const auto make = [&f](std::span<const std::string_view> label_values) {
        series& s = f.series_.emplace_back();
        s.label_values.assign(label_values.begin(), label_values.end());
        s.buckets.assign(f.spec_.bounds.size(), 0);
        s.native_schema = f.spec_.native ? f.spec_.native_schema : 0;
        return static_cast<std::uint32_t>(f.series_.size() - 1);
    };
    ++changes_;
    // The folded-updates family itself never folds: it has one series per family.
    const std::size_t made = f.series_.size() - (f.overflow_ != family::none ? 1 : 0);
    if (id != 0 && !f.spec_.fixed_labels && made >= opts_.max_series) {
        ++f.folded_;
        if (f.folded_series_ != family::none) {
            ++families_[0].series_[f.folded_series_].value;
        }
        if (f.overflow_ == family::none) {
            const std::vector<std::string_view> other(values.size(), overflow_value);
            f.overflow_ = make(other);
        }
        return {id, f.overflow_};
    }
    const std::uint32_t index = make(values);
    f.index_.emplace(key_, index);
    return {id, index};
}

void metric_store::throw_no_series(series_ref s) {
    throw metrics_error(
        fmt::format("series {} of metric family id {} does not exist", s.index, s.family));
}

series& metric_store::value_series(series_ref s, std::string_view call) {
    series& x = at(s);
    const family_spec& spec = families_[s.family].spec_;
    if (!takes_values(spec.type)) {
        throw metrics_error(fmt::format("metric family '{}' is a {}: expected observe(), not {}()",
                                        spec.name, to_string(spec.type), call));
    }
    return x;
}

void metric_store::add(series_ref s, std::uint64_t delta) {
    value_series(s, "add").value += delta;
    ++changes_;
}

void metric_store::set(series_ref s, std::uint64_t value) {
    value_series(s, "set").value = value;
    ++changes_;
}

void metric_store::observe(series_ref s, std::uint64_t value) {
    series& x = at(s);
    const family_spec& spec = families_[s.family].spec_;
    if (takes_values(spec.type)) {
        throw metrics_error(
            fmt::format("metric family '{}' is a {}: expected add() or set(), not observe()",
                        spec.name, to_string(spec.type)));
    }
    const std::size_t bucket = bucket_of(families_[s.family], value);
    if (bucket < spec.bounds.size()) {
        ++x.buckets[bucket];
    }
    if (spec.native) {
        observe_native(x, value, spec.decimals);
    }
    x.sum += value;
    ++x.count;
    ++changes_;
}

void metric_store::add_observations(series_ref s,
                                    std::span<const std::uint64_t> bucket_counts,
                                    std::uint64_t sum) {
    series& x = at(s);
    const family_spec& spec = families_[s.family].spec_;
    if (takes_values(spec.type) || spec.native || bucket_counts.size() != spec.bounds.size() + 1) {
        throw metrics_error(fmt::format(
            "add_observations on metric family '{}' ({}{}) with {} bucket counts: expected a "
            "histogram without native buckets or a summary, and {} counts",
            spec.name, to_string(spec.type), spec.native ? ", native" : "", bucket_counts.size(),
            spec.bounds.size() + 1));
    }
    std::uint64_t count = 0;
    for (std::size_t i = 0; i < bucket_counts.size(); ++i) {
        if (i < spec.bounds.size()) {
            x.buckets[i] += bucket_counts[i];
        }
        count += bucket_counts[i];
    }
    if (count == 0) {
        return;
    }
    x.sum += sum;
    x.count += count;
    changes_ += count;
}

void metric_store::observe(series_ref s, std::uint64_t value, const exemplar& ex) {
    exemplar_view view(ex.label_name, ex.label_value, ex.timestamp_us);
    view.trace_id = ex.trace_id;
    view.span_id = ex.span_id;
    observe(s, value, view);
}

void metric_store::observe(series_ref s, std::uint64_t value, const exemplar_view& ex) {
    observe(s, value);
    keep_exemplar(s, value, ex);
}

void metric_store::keep_exemplar(series_ref s, std::uint64_t value, const exemplar_view& ex) {
    const family_spec& spec = families_[s.family].spec_;
    if (spec.type != metric_type::histogram || ex.label_value.empty()) {
        return;
    }
    series& x = at(s);
    if (x.exemplars.empty()) {
        x.exemplars.resize(spec.bounds.size() + 1);
    }
    exemplar& kept = x.exemplars[bucket_of(families_[s.family], value)];
    kept.label_name.assign(ex.label_name);
    kept.label_value.assign(ex.label_value);
    kept.value = value;
    kept.timestamp_us = ex.timestamp_us;
    kept.trace_id = ex.trace_id;
    kept.span_id = ex.span_id;
}

std::optional<family_id> metric_store::id_of(std::string_view name) const noexcept {
    const auto it = lines_.find(name);
    if (it == lines_.end() || families_[it->second].spec_.name != name) {
        return std::nullopt;
    }
    return it->second;
}

const family* metric_store::find(std::string_view name) const noexcept {
    const auto id = id_of(name);
    return id ? &families_[*id] : nullptr;
}

const family* metric_store::owner_of_line(std::string_view line_name) const noexcept {
    const auto it = lines_.find(line_name);
    return it == lines_.end() ? nullptr : &families_[it->second];
}

const series* metric_store::find_series(std::string_view family_name,
                                        std::initializer_list<std::string_view> values) const {
    const family* f = find(family_name);
    if (f == nullptr || values.size() != f->spec_.label_names.size()) {
        return nullptr;
    }
    for (const series& s : f->series_) {
        if (std::equal(s.label_values.begin(), s.label_values.end(), values.begin())) {
            return &s;
        }
    }
    return nullptr;
}

std::optional<std::uint64_t> metric_store::value(
    std::string_view family_name, std::initializer_list<std::string_view> values) const {
    const series* s = find_series(family_name, values);
    if (s == nullptr || !takes_values(find(family_name)->spec_.type)) {
        return std::nullopt;
    }
    return s->value;
}

}  // namespace xtel::metrics
