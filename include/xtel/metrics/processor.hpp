#pragma once
/// The metrics processor: transfer records in, series of a metric_store out, through a set of
/// builders fixed at compile time (`processor<Builders...>`) and any added at run time.
///
/// It runs where exporters run, on the pipeline's flusher thread, never on a transfer's path.
/// A batch's records are first grouped by their compact attributes and direction (16 + 1
/// bytes, hashed), and summed per group: transfers, requests, bytes, transfer and post times.
/// Each distinct group is normalized by the attribute registry once (and kept for later
/// batches), and the builders run once per group and batch with the sums, never once per
/// transfer. A batch of 4096 transfers between a few peers is a few builder calls.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/attributes.hpp"
#include "xtel/metrics/builder.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/types.hpp"

namespace xtel::metrics {

struct processor_options {
    /// Series per family before updates fold into the overflow series (metric_store.hpp).
    std::size_t max_series = metric_store::default_max_series;
    /// Label names no family may use; an exporter that adds its own labels names them here.
    std::vector<std::string> reserved_labels;
    /// Called with each family given to add_family before it is added; throws to refuse it.
    std::function<void(const family_spec&)> check;
    /// The compile-time builders to run, by name; every one of them when unset.
    std::optional<std::vector<std::string>> builders;
    /// Distinct attribute sets whose normalized data is kept between batches; past it the
    /// cache starts again, so unbounded peers cannot grow it without bound.
    std::size_t max_cached_groups = 4096;
};

namespace detail {

/// The transfers of one batch that share attributes and direction, and what they add up to.
struct group_state {
    transfer_attributes attrs;
    direction dir = direction::tx;
    measurements totals;
    telemetry_data data;
    bool extracted = false;
};

/// Grouping, normalization and the run-time builders: what does not depend on Builders.
class processor_core {
  public:
    processor_core(metrics::context ctx,
                   attribute_registry registry,
                   const processor_options& opts);

    processor_core(const processor_core&) = delete;
    processor_core& operator=(const processor_core&) = delete;

    /// Sums `records` into their groups and normalizes groups seen for the first time; the
    /// groups the batch touched are then listed by touched().
    void group(std::span<const transfer_record> records, const label_table& labels);
    /// The same for transfers their producer summed (transfer_tally): each adds its sums.
    void group(std::span<const transfer_tally> tallies, const label_table& labels);
    std::span<const std::uint32_t> touched() const noexcept { return touched_; }
    transfer_group view(std::uint32_t index) const noexcept {
        const group_state& g = groups_[index];
        return {g.data, g.totals, g.attrs, g.dir, ctx_};
    }

    void add_builder(std::unique_ptr<builder> b);
    /// Runs the run-time builders on one group; an exception is counted, not thrown.
    void build_dynamic(const transfer_group& g) noexcept;

    metric_store& store() noexcept { return store_; }
    const metric_store& store() const noexcept { return store_; }
    const attribute_registry& attributes() const noexcept { return registry_; }
    const metrics::context& ctx() const noexcept { return ctx_; }
    std::uint64_t builder_failures() const noexcept { return failures_; }
    /// Distinct groups whose normalized data is kept now.
    std::size_t cached_groups() const noexcept { return groups_.size(); }

  private:
    /// Starts a batch: the last one's sums cleared, the cache started again when it is full
    /// or the labels are another table's.
    void begin_group(const label_table& labels);
    /// The sums of the group of `attrs` and `dir`, listed as touched.
    measurements& totals_of(const transfer_attributes& attrs, direction dir);
    /// Normalizes the groups the batch touched for the first time.
    void end_group(const label_table& labels);
    /// The index of the group of `attrs` and `dir`, found by hashing them, or added
    /// (totals_of tries the last group first).
    std::uint32_t find_or_add(const transfer_attributes& attrs, direction dir);
    void reset();

    const metrics::context ctx_;
    const attribute_registry registry_;
    const std::size_t max_cached_groups_;
    metric_store store_;
    std::vector<group_state> groups_;
    std::vector<std::uint32_t> slots_;  // open addressing: group index + 1, 0 = empty
    std::vector<std::uint32_t> touched_;
    std::uint32_t last_ = UINT32_MAX;  // consecutive records mostly share a group
    const label_table* labels_ = nullptr;
    std::vector<std::unique_ptr<builder>> dynamic_;
    std::uint64_t failures_ = 0;
};

/// Throws metrics_error when a name in `wanted` is not in `known`; the message lists `known`.
void check_builder_names(std::span<const std::string> wanted,
                         std::span<const std::string_view> known);

}  // namespace detail

template <builder_policy... Builders>
class processor {
  public:
    /// The names of the compile-time builders, in order.
    static constexpr std::array<std::string_view, sizeof...(Builders)> builder_names{
        builder_traits<Builders>::name...};

    /// Sets up the builders `opts.builders` names (all when unset). Throws metrics_error for an
    /// invalid registry, an unknown builder name, or a family a builder cannot add.
    explicit processor(metrics::context ctx = {},
                       attribute_registry registry = default_attributes(),
                       const processor_options& opts = {})
        : core_(std::move(ctx), std::move(registry), opts) {
        if (opts.builders) {
            detail::check_builder_names(*opts.builders, builder_names);
            for (std::size_t i = 0; i < sizeof...(Builders); ++i) {
                enabled_[i] = false;
                for (const auto& n : *opts.builders) {
                    enabled_[i] = enabled_[i] || n == builder_names[i];
                }
            }
        }
        setup_each(std::index_sequence_for<Builders...>{});
    }

    processor(const processor&) = delete;
    processor& operator=(const processor&) = delete;

    /// Adds a builder chosen at run time; runs its setup now (whose exceptions propagate, and
    /// the builder is not added). Not concurrently with process().
    void add_builder(std::unique_ptr<builder> b) { core_.add_builder(std::move(b)); }

    /// Folds a batch of transfer records into the store. `labels` resolves their label ids.
    void process(std::span<const transfer_record> records, const label_table& labels) {
        core_.group(records, labels);
        build_touched();
    }
    /// The same for transfers their producer summed (transfer_tally).
    void process(std::span<const transfer_tally> tallies, const label_table& labels) {
        core_.group(tallies, labels);
        build_touched();
    }

    /// The compile-time builder of type B.
    template <class B>
    B& get() noexcept {
        return std::get<B>(builders_);
    }
    /// Whether the builder of type B runs.
    template <class B>
    bool enabled() const noexcept {
        static_assert(index_of<B>() < sizeof...(Builders), "B is not a builder of this processor");
        return enabled_[index_of<B>()];
    }

    const metric_store& store() const noexcept { return core_.store(); }
    /// The store the builders fill, for producers that add families of their own beside them
    /// (the metric model's event families). Not concurrently with process().
    metric_store& store() noexcept { return core_.store(); }
    const attribute_registry& attributes() const noexcept { return core_.attributes(); }
    const metrics::context& ctx() const noexcept { return core_.ctx(); }
    /// Exceptions thrown by run-time builders' build(), counted and swallowed.
    std::uint64_t builder_failures() const noexcept { return core_.builder_failures(); }
    std::size_t cached_groups() const noexcept { return core_.cached_groups(); }

  private:
    void build_touched() {
        for (const std::uint32_t index : core_.touched()) {
            const transfer_group g = core_.view(index);
            build_each(g, std::index_sequence_for<Builders...>{});
            core_.build_dynamic(g);
        }
    }

    static constexpr std::array<bool, sizeof...(Builders)> all_enabled() {
        std::array<bool, sizeof...(Builders)> a{};
        a.fill(true);
        return a;
    }

    template <class B>
    static constexpr std::size_t index_of() {
        constexpr std::array<bool, sizeof...(Builders)> same{std::is_same_v<B, Builders>...};
        for (std::size_t i = 0; i < same.size(); ++i) {
            if (same[i]) {
                return i;
            }
        }
        return same.size();
    }

    template <std::size_t... I>
    void setup_each(std::index_sequence<I...>) {
        ((enabled_[I] ? builder_traits<Builders>::setup(std::get<I>(builders_), core_.store(),
                                                        core_.attributes())
                      : void()),
         ...);
    }

    template <std::size_t... I>
    void build_each(const transfer_group& g, std::index_sequence<I...>) {
        ((enabled_[I] ? std::get<I>(builders_).build(g, core_.store()) : void()), ...);
    }

    detail::processor_core core_;
    std::tuple<Builders...> builders_;
    std::array<bool, sizeof...(Builders)> enabled_ = all_enabled();
};

}  // namespace xtel::metrics
