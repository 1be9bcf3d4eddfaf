#pragma once
/// The builder policy contract, its traits, and the run-time base for builders added with
/// processor::add_builder.
///
/// A builder turns groups of transfers into series of a metric_store. The processor owns one
/// instance and calls it only on the thread that processes (the pipeline's flusher), never on
/// a transfer's path:
///
///   PRECONDITION: B is default-constructible.
///   PRECONDITION: `b.build(const transfer_group&, metric_store&)` adds the group's
///                 contribution to its series. It may throw (a store error, allocation); the
///                 processor lets a compile-time builder's exception through to its caller.
///   OPTIONAL:     `void setup(metric_store&, const attribute_registry&)`: once, before the
///                 first build, to add its families (and keep their ids). Families may also
///                 be added lazily in build(), at the cost of a lookup by name per call.
///   OPTIONAL:     `static constexpr std::string_view name`: how configuration names it
///                 (NIXL_TELEMETRY_PROMETHEUS_BUILDERS); "builder" when absent.

#include <concepts>
#include <string_view>

#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/attributes.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/types.hpp"

namespace xtel::metrics {

/// Transfers of one batch that share every attribute and their direction, added up.
struct transfer_group {
    /// The attributes normalized by the registry, one field per entry, in order.
    const telemetry_data& data;
    /// The group's sums: transfers, requests, bytes, transfer and post times.
    const measurements& totals;
    /// The compact attributes every transfer of the group carries, and their direction, for
    /// builders that need a fixed fact whatever the registry says (legacy: tx or rx).
    const transfer_attributes& attrs;
    direction dir;
    const metrics::context& ctx;
};

template <class B>
concept builder_policy = std::default_initializable<B> &&
    requires(B& b, const transfer_group& g, metric_store& s) {
    b.build(g, s);
};

/// Fills defaults for a builder's optional members.
template <builder_policy B>
struct builder_traits {
    static constexpr std::string_view name = [] {
        if constexpr (requires { B::name; }) {
            return std::string_view{B::name};
        } else {
            return std::string_view{"builder"};
        }
    }();

    static void setup(B& b, metric_store& store, const attribute_registry& registry) {
        // Found by name, then checked: a setup of another form is an error, not a no-op.
        constexpr bool callable = requires {
            b.setup(store, registry);
        };
        static_assert(
            !requires { &B::setup; } || callable,
            "builder hook setup must be callable as `void setup(metric_store&, const "
            "attribute_registry&)`");
        if constexpr (callable) {
            b.setup(store, registry);
        }
    }
};

/// A builder chosen at run time (processor::add_builder): one virtual call per group, on the
/// processing thread only.
class builder {
  public:
    virtual ~builder() = default;

    /// How logs name it.
    virtual std::string_view name() const noexcept { return "builder"; }
    /// Once, when added: add families here and keep their ids.
    virtual void setup(metric_store& /*store*/, const attribute_registry& /*registry*/) {}
    /// Adds one group's contribution. An exception is caught and counted by the processor
    /// (processor::builder_failures), so one faulty builder does not stop the others.
    virtual void build(const transfer_group& group, metric_store& store) = 0;
};

}  // namespace xtel::metrics
