#pragma once
/// xtel's metric store: families of counters, gauges, histograms and summaries, each series
/// told apart by its label values, with a limit on the series of each family. The agent's
/// metric model (agent_metrics.hpp) keeps its families in one, filled by the processor's
/// builders and the model's own event families and time histograms; xtel-exporter keeps its
/// health in another. Renderers read the snapshot a publisher copies out of it (snapshot.hpp).
///
/// A label value such as a peer's name is unbounded, so the number of series is bounded
/// instead: past `max_series` series in a family, an update for a new label set goes to the
/// family's overflow series, whose every label value is "other", and the family's series of
/// `xtel_metrics_series_folded_total{family="<name>"}` counts the updates folded there. A
/// series, once made, stays (counters never go back), so memory is bounded by
/// families x (max_series + 1).
///
/// Not thread-safe: one thread updates (the flusher); readers take turns with it.

#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xtel/metrics/types.hpp"

namespace xtel::metrics {

/// counter: a total that only grows (add). gauge: a level (set, or add for increments).
/// histogram: observations counted in buckets of fixed bounds, with their sum and count.
/// summary: the sum and count of observations, without buckets or quantiles.
enum class metric_type : std::uint8_t { counter, gauge, histogram, summary };

constexpr std::string_view to_string(metric_type t) noexcept {
    switch (t) {
        case metric_type::counter:
            return "counter";
        case metric_type::gauge:
            return "gauge";
        case metric_type::histogram:
            return "histogram";
        case metric_type::summary:
            return "summary";
    }
    return "untyped";
}

/// What a family is: its exposition name (counters end in _total), HELP text, type and the
/// names of the labels its series vary by.
struct family_spec {
    std::string name;
    std::string help;
    metric_type type = metric_type::counter;
    std::vector<std::string> label_names;
    /// Values (and histogram and summary sums) are kept as integers in units of 10^-decimals
    /// and shown divided by 10^decimals, exactly: microseconds kept with decimals 6 are shown as
    /// seconds (450 -> 0.000450), the base unit Prometheus expects, without a rounding error in
    /// the sums. At most 18.
    std::uint8_t decimals = 0;
    /// Histogram only: the buckets' upper bounds, in the unit of the values kept, strictly
    /// increasing; the +Inf bucket is implied. Empty for the other types, and for a histogram
    /// kept in native form only (its classic form is then the +Inf bucket alone).
    std::vector<double> bounds{};
    /// The unit the shown values are in, as OpenMetrics names it in `# UNIT` ("seconds",
    /// "bytes"); the name must then end in `_<unit>` (before `_total`). Empty: no unit line.
    std::string unit{};
    /// The label values come from a small set the code fixes (error kinds, NIXL's statuses,
    /// exporter names, the host's name), not from the outside world (peers): the family is
    /// exempt from max_series, never folds, and has no folded-updates series.
    bool fixed_labels = false;
    /// Histogram only: whether its series keep native (exponential) buckets too
    /// (native_histogram.hpp), over the values as shown (divided by 10^decimals), starting at
    /// `native_schema` (min_schema to max_schema).
    bool native = false;
    std::int8_t native_schema = 0;

    friend bool operator==(const family_spec&, const family_spec&) = default;
};

using family_id = std::uint32_t;

/// A histogram bucket's example observation: which transfer (a request or trace id the caller
/// gave), its value (in the family's units, as kept: 10^-decimals), and when (µs since the
/// epoch). An empty `label_value` means none. `trace_id` and `span_id`, when not all zero, are
/// those of the span the agent wrote for that transfer (docs/trace-format.md): renderers show
/// them, so that a bucket links to its span.
struct exemplar {
    std::string label_name;
    std::string label_value;
    std::uint64_t value = 0;
    std::uint64_t timestamp_us = 0;
    std::array<std::uint8_t, 16> trace_id{};
    std::array<std::uint8_t, 8> span_id{};

    friend bool operator==(const exemplar&, const exemplar&) = default;
};

/// An exemplar as an observation hands it: its text as views, which the store copies into the
/// bucket's exemplar, reusing that one's memory, so that a stream of observations with ids
/// allocates nothing once each bucket has held an id as long.
struct exemplar_view {
    /// Explicit, so that a braced exemplar (`{.label_name = ...}`) always means `exemplar`.
    explicit exemplar_view(std::string_view name,
                           std::string_view value,
                           std::uint64_t timestamp) noexcept
        : label_name(name), label_value(value), timestamp_us(timestamp) {}

    std::string_view label_name;
    std::string_view label_value;
    std::uint64_t timestamp_us = 0;
    std::array<std::uint8_t, 16> trace_id{};
    std::array<std::uint8_t, 8> span_id{};
};

/// One series: its label values (in the order of the family's label names) and what it holds.
struct series {
    std::vector<std::string> label_values;
    /// counter, gauge: the value.
    std::uint64_t value = 0;
    /// histogram: observations per bucket, one per bound, NOT cumulative; an observation goes
    /// in the first bucket whose bound is >= it, and one above every bound only in `count`
    /// (the +Inf bucket). Empty for the other types.
    std::vector<std::uint64_t> buckets;
    /// histogram: the latest exemplar of each bucket, one per bound and the last for +Inf
    /// (bounds.size() + 1 entries), or empty when no observation carried one yet.
    std::vector<exemplar> exemplars;
    /// histogram, summary: the sum and the number of observations.
    std::uint64_t sum = 0;
    std::uint64_t count = 0;
    /// native histogram (family_spec::native): observations per native bucket, dense and NOT
    /// cumulative, `native_buckets[k]` being bucket `native_first + k` at `native_schema`
    /// (the family's, or lower once the buckets would have grown wider than
    /// native::max_buckets); the observations of 0 in `zero_count`. The sum and count above
    /// are the native histogram's too.
    std::vector<std::uint64_t> native_buckets;
    std::int32_t native_first = 0;
    std::int8_t native_schema = 0;
    std::uint64_t zero_count = 0;

    friend bool operator==(const series&, const series&) = default;
};

/// A series found once and updated many times without a lookup by label values.
struct series_ref {
    family_id family = 0;
    std::uint32_t index = 0;
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
    /// By a value's bit width (std::bit_width), the first bound not below 2^(width - 1):
    /// where the search for the value's bucket starts (metric_store::bucket_of).
    std::array<std::uint32_t, 65> bucket_start_{};
};

struct store_options {
    /// Series per family before updates fold into the overflow series; at least 1.
    std::size_t max_series = 1000;
    /// Label names no family may use (an exporter adds labels of these names to every series).
    std::vector<std::string> reserved_labels;
    /// Called with each family given to add_family, before anything else is checked; throws to
    /// refuse it (an exporter whose own names it would collide with).
    std::function<void(const family_spec&)> check;
};

class metric_store {
  public:
    static constexpr std::size_t default_max_series = 1000;
    static constexpr std::string_view overflow_value = "other";
    static constexpr std::string_view folded_family = "xtel_metrics_series_folded_total";

    /// Throws metrics_error when max_series is 0.
    explicit metric_store(store_options opts = {});

    /// The id of the family `spec` describes, added when new. Throws metrics_error when
    /// `check` refuses it, the name is not a metric name, a counter's name does not end in
    /// _total, a label name is invalid, repeated or reserved (or le in a histogram, quantile
    /// in a summary), the unit is not one or does not end the name, histogram bounds are not
    /// finite and strictly increasing as shown (or given to another type), the name is taken
    /// by a family of another spec, or a line name it would use (name, name_bucket, name_sum,
    /// name_count) is one another family uses (exposition_rules.hpp: what decode_snapshot
    /// checks too).
    family_id add_family(family_spec spec);

    /// Reserves `names` besides the labels reserved so far (they come first in messages), for
    /// the families added from now on: a consumer of the store that adds labels of its own
    /// (a node-file reader) declares them when it starts serving the store.
    void reserve_labels(std::span<const std::string_view> names);

    /// The series of `values` in family `f`, made when new (counters and gauges at 0, empty
    /// histograms), or the overflow series past the limit (the fold is counted now, once).
    /// Throws metrics_error when the number of values is not the number of the family's
    /// labels.
    series_ref series_of(family_id f, std::span<const std::string_view> values);
    series_ref series_of(family_id f, std::initializer_list<std::string_view> values) {
        return series_of(f, std::span<const std::string_view>(values.begin(), values.size()));
    }

    /// Adds `delta` to a counter's or gauge's series (throws metrics_error for the others).
    void add(series_ref s, std::uint64_t delta);
    /// Sets a gauge's (or counter's) series to `value` (throws metrics_error for the others).
    void set(series_ref s, std::uint64_t value);
    /// Observes `value` in a histogram's or summary's series (throws metrics_error for the
    /// others).
    void observe(series_ref s, std::uint64_t value);
    /// Observes `value` in a histogram's series and makes `ex` (whose value is set to `value`)
    /// its bucket's exemplar, replacing the one before. An exemplar with an empty label value
    /// is not kept.
    void observe(series_ref s, std::uint64_t value, const exemplar& ex);
    void observe(series_ref s, std::uint64_t value, const exemplar_view& ex);
    /// The second half of observe(s, value, ex): makes `ex` the exemplar of the bucket `value`
    /// falls in, observing nothing. For a caller that observes a round's values first and then
    /// gives each bucket only the exemplar the last of them would have left.
    void keep_exemplar(series_ref s, std::uint64_t value, const exemplar_view& ex);
    /// Adds to histogram or summary series `s` what observing values one by one would have:
    /// `bucket_counts[i]` observations in bucket i (one count per bound and the last for +Inf;
    /// a summary's one count), whose values add up to `sum`. For a fold that buckets a round's
    /// values itself (bucket_index) and adds each series' once. Throws metrics_error for a
    /// counter or gauge, a histogram with native buckets (they need each value), or counts of
    /// another size.
    void add_observations(series_ref s,
                          std::span<const std::uint64_t> bucket_counts,
                          std::uint64_t sum);
    /// The bucket `value` falls in, in histogram series `s`: an index into its bounds, or
    /// bounds().size() for +Inf.
    std::size_t bucket_index(series_ref s, std::uint64_t value) const noexcept {
        return bucket_of(families_[s.family], value);
    }

    /// The same, finding the series by its label values each time.
    void add(family_id f, std::span<const std::string_view> values, std::uint64_t delta) {
        add(series_of(f, values), delta);
    }
    void add(family_id f, std::initializer_list<std::string_view> values, std::uint64_t delta) {
        add(series_of(f, values), delta);
    }
    void set(family_id f, std::span<const std::string_view> values, std::uint64_t value) {
        set(series_of(f, values), value);
    }
    void set(family_id f, std::initializer_list<std::string_view> values, std::uint64_t value) {
        set(series_of(f, values), value);
    }
    void observe(family_id f, std::span<const std::string_view> values, std::uint64_t value) {
        observe(series_of(f, values), value);
    }
    void observe(family_id f, std::initializer_list<std::string_view> values, std::uint64_t value) {
        observe(series_of(f, values), value);
    }

    /// Every family, in the order added; the folded-updates family is the first.
    std::span<const family> families() const noexcept { return families_; }
    /// The family named `name`; nullptr when none.
    const family* find(std::string_view name) const noexcept;
    /// The id of the family named `name`; nullopt when none.
    std::optional<family_id> id_of(std::string_view name) const noexcept;
    /// The family that uses `line_name` for a line (its name, or a histogram's or summary's
    /// name_bucket, name_sum, name_count); nullptr when none.
    const family* owner_of_line(std::string_view line_name) const noexcept;
    /// The series of `values` in the family named `family_name`; nullptr when either is
    /// missing.
    const series* find_series(std::string_view family_name,
                              std::initializer_list<std::string_view> values) const;
    /// The value of a counter's or gauge's series; nullopt when the family or the series does
    /// not exist.
    std::optional<std::uint64_t> value(std::string_view family_name,
                                       std::initializer_list<std::string_view> values) const;
    /// Grows with every change (an update, a new family or series): "has anything changed
    /// since".
    std::uint64_t changes() const noexcept { return changes_; }
    std::size_t max_series() const noexcept { return opts_.max_series; }

    /// The line names a family of `name` and `type` uses in the text exposition formats.
    static std::vector<std::string> line_names(std::string_view name, metric_type type);

  private:
    /// The series `s` names; throws metrics_error when there is none. Inline: every update
    /// starts here.
    series& at(series_ref s) {
        if (s.family >= families_.size() || s.index >= families_[s.family].series_.size())
            [[unlikely]] {
            throw_no_series(s);
        }
        return families_[s.family].series_[s.index];
    }
    [[noreturn]] static void throw_no_series(series_ref s);
    /// The bucket `value` falls in: the first bound not below it (bounds.size(): +Inf's).
    /// Where lower_bound over every bound would end, from the first bound of the value's bit
    /// width on: the bounds before it are below the value, and with bounds spread over
    /// magnitudes (the default's 10 us to 10 s) one or two are left to compare. lower_bound's
    /// binary search over 18 bounds was a third of the fold's time, mostly its mispredicted
    /// branches. Inline: the fold asks it twice for every timed transfer.
    static std::size_t bucket_of(const family& f, std::uint64_t value) noexcept {
        const std::vector<double>& bounds = f.spec_.bounds;
        std::size_t i = f.bucket_start_[static_cast<std::size_t>(std::bit_width(value))];
        const auto v = static_cast<double>(value);
        while (i < bounds.size() && bounds[i] < v) {
            ++i;
        }
        return i;
    }
    /// at(s), for add() and set(): throws metrics_error naming `call` when the family takes
    /// observations instead of values.
    series& value_series(series_ref s, std::string_view call);
    void check_new(const family_spec& spec) const;

    store_options opts_;
    std::vector<family> families_;
    std::map<std::string, family_id, std::less<>> lines_;  // line name -> family using it
    /// Every name an OpenMetrics body could give a family's lines (openmetrics_names.hpp): a
    /// new family none of whose names is here cannot clash there.
    std::set<std::string, std::less<>> openmetrics_names_;
    std::string key_;  // scratch: encoded label values
    std::uint64_t changes_ = 0;
};

}  // namespace xtel::metrics
