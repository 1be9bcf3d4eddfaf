#pragma once
/// Where builders put their series: families of counters and gauges, each series told apart
/// by its label values, with a limit on the series of each family.
///
/// A label value such as a peer's name is unbounded, so the number of series is bounded
/// instead: past `max_series` series in a family, an update for a new label set goes to the
/// family's overflow series, whose every label value is "other", and the family's series of
/// `xtel_metrics_series_folded_total{family="<name>"}` counts the updates folded there. A
/// series, once made, stays (counters never go back), so memory is bounded by
/// families x (max_series + 1).
///
/// Not thread-safe: one thread updates (the flusher); readers take turns with it.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xtel/metrics/types.hpp"

namespace xtel::metrics {

enum class metric_type : std::uint8_t { counter, gauge };

constexpr std::string_view to_string(metric_type t) noexcept {
    return t == metric_type::counter ? "counter" : "gauge";
}

/// What a family is: its exposition name (counters end in _total), HELP text, type and the
/// names of the labels its series vary by.
struct family_spec {
    std::string name;
    std::string help;
    metric_type type = metric_type::counter;
    std::vector<std::string> label_names;
    /// Values are kept as integers in units of 10^-decimals and shown divided by 10^decimals,
    /// exactly: microseconds kept with decimals 6 are shown as seconds (450 -> 0.000450), the
    /// base unit Prometheus expects, without a rounding error in the sums. At most 18.
    std::uint8_t decimals = 0;

    friend bool operator==(const family_spec&, const family_spec&) = default;
};

using family_id = std::uint32_t;

/// One series: its label values (in the order of the family's label names) and its value.
struct series {
    std::vector<std::string> label_values;
    std::uint64_t value = 0;
};

/// A family and its series, in the order they were made.
class family {
  public:
    const family_spec& spec() const noexcept { return spec_; }
    std::span<const series> all_series() const noexcept { return series_; }
    /// Updates that went to the overflow series.
    std::uint64_t folded() const noexcept { return folded_; }
    /// Whether the overflow series exists (it is made by the first fold).
    bool overflowed() const noexcept { return overflow_ != none; }

  private:
    friend class metric_store;
    static constexpr std::uint32_t none = UINT32_MAX;

    family_spec spec_;
    std::vector<series> series_;
    std::unordered_map<std::string, std::uint32_t> index_;  // encoded label values -> series
    std::uint32_t overflow_ = none;
    std::uint32_t folded_series_ = none;  // this family's series in the folded-updates family
    std::uint64_t folded_ = 0;
};

struct store_options {
    /// Series per family before updates fold into the overflow series; at least 1.
    std::size_t max_series = 1000;
    /// Label names no family may use (an exporter adds labels of these names to every series).
    std::vector<std::string> reserved_labels;
    /// Called with each new family before it is added; throws to refuse it (an exporter whose
    /// own names it would collide with).
    std::function<void(const family_spec&)> check;
};

class metric_store {
  public:
    static constexpr std::size_t default_max_series = 1000;
    static constexpr std::string_view overflow_value = "other";
    static constexpr std::string_view folded_family = "xtel_metrics_series_folded_total";

    /// Throws metrics_error when max_series is 0.
    explicit metric_store(store_options opts = {});

    /// The id of the family `spec` describes, added when new. Throws metrics_error when the
    /// name is not a metric name, a counter's name does not end in _total, a label name is
    /// invalid, repeated or reserved, or the name is taken by a family of another spec.
    family_id add_family(family_spec spec);

    /// Adds `delta` to the series of `values` (made at 0 when new). Throws metrics_error when
    /// the number of values is not the number of the family's labels.
    void add(family_id f, std::span<const std::string_view> values, std::uint64_t delta);
    void add(family_id f, std::initializer_list<std::string_view> values, std::uint64_t delta) {
        add(f, std::span<const std::string_view>(values.begin(), values.size()), delta);
    }
    /// Sets the series of `values` to `value`.
    void set(family_id f, std::span<const std::string_view> values, std::uint64_t value);
    void set(family_id f, std::initializer_list<std::string_view> values, std::uint64_t value) {
        set(f, std::span<const std::string_view>(values.begin(), values.size()), value);
    }

    /// Every family, in the order added; the folded-updates family is the first.
    std::span<const family> families() const noexcept { return families_; }
    /// The family named `name`; nullptr when none.
    const family* find(std::string_view name) const noexcept;
    /// The value of a series; nullopt when the family or the series does not exist.
    std::optional<std::uint64_t> value(std::string_view family_name,
                                       std::initializer_list<std::string_view> values) const;
    /// Grows with every change (an update, a new family): "has anything changed since".
    std::uint64_t changes() const noexcept { return changes_; }
    std::size_t max_series() const noexcept { return opts_.max_series; }

  private:
    series& find_or_make(family_id f, std::span<const std::string_view> values);

    store_options opts_;
    std::vector<family> families_;
    std::string key_;  // scratch: encoded label values
    std::uint64_t changes_ = 0;
};

}  // namespace xtel::metrics
