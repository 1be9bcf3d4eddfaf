#pragma once
/// The built-in exporters, named once, and every pipeline made of them: declared extern here,
/// instantiated once in src/registry/pipelines.cpp, handed out by the registry
/// (xtel/registry/runtime_telemetry.hpp's make_telemetry, and xtel/agent/agent.hpp's make_agent
/// for the agent over one) by the names in NIXL_TELEMETRY_EXPORTER.
///
/// Adding a built-in exporter is its header (included below), its .cpp, and one entry in
/// `builtin_exporters`; its `static constexpr std::string_view name` is the name users give.
/// Every combination of the built-in exporters, with or without plugins, is then precompiled
/// and in the registry's table: nothing else lists them.

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "xtel/core/telemetry.hpp"
#include "xtel/exporters/buffer.hpp"
#include "xtel/exporters/node.hpp"
#include "xtel/exporters/plugin.hpp"
#include "xtel/exporters/prometheus.hpp"

namespace xtel {

/// The exporters compiled into xtel, in the order a pipeline calls them. Any other name in
/// NIXL_TELEMETRY_EXPORTER is a plugin, loaded by plugin_exporter (which stands for any number
/// of plugins and comes after the built-in ones).
using builtin_exporters = exporter_list<buffer_exporter, prometheus_exporter, node_exporter>;

namespace detail {

template <class List, class Added>
struct append;
template <class... E, class Added>
struct append<exporter_list<E...>, Added> {
    using type = exporter_list<E..., Added>;
};

/// The exporters of `In` whose bit is set in Mask (bit 0: the first one), in list order.
template <unsigned Mask, class In, class Out = exporter_list<>>
struct select_exporters {
    using type = Out;
};
template <unsigned Mask, class First, class... Rest, class Out>
struct select_exporters<Mask, exporter_list<First, Rest...>, Out>
    : select_exporters<
          (Mask >> 1u),
          exporter_list<Rest...>,
          std::conditional_t<(Mask & 1u) != 0, typename append<Out, First>::type, Out>> {};

template <class List>
struct exporter_names;
template <class... E>
struct exporter_names<exporter_list<E...>> {
    static constexpr std::array<std::string_view, sizeof...(E)> value = {E::name...};
};

/// Stands in for a mask past pipeline_count in XTEL_FOR_EACH_PIPELINE_MASK: an empty class
/// (see the specialisation of basic_telemetry below, and basic_agent's in basic_agent.hpp),
/// so instantiating it costs nothing.
template <unsigned Mask>
struct unused_pipeline {};

}  // namespace detail

/// The pipeline policies a mask picks from: the built-in exporters, then plugin_exporter.
using pipeline_policies = detail::append<builtin_exporters, plugin_exporter>::type;

/// The names NIXL_TELEMETRY_EXPORTER gives the built-in exporters, from their types.
inline constexpr auto builtin_exporter_names = detail::exporter_names<builtin_exporters>::value;
/// The policies' names, bit by bit ("plugin" last).
inline constexpr auto pipeline_policy_names = detail::exporter_names<pipeline_policies>::value;

/// Whether `name` is a built-in exporter's (otherwise it names a plugin).
constexpr bool is_builtin_exporter(std::string_view name) noexcept {
    for (const auto b : builtin_exporter_names) {
        if (b == name) {
            return true;
        }
    }
    return false;
}

/// How many pipelines there are: one per subset of the policies (0: telemetry off).
inline constexpr unsigned pipeline_count = 1u << pipeline_policy_names.size();

/// The exporter list of pipeline `Mask` (bit i: pipeline_policies' i-th policy).
template <unsigned Mask>
using pipeline_exporters_t =
    std::conditional_t<(Mask < pipeline_count),
                       typename detail::select_exporters<Mask, pipeline_policies>::type,
                       detail::unused_pipeline<Mask>>;

/// The pipeline of a mask: `pipeline_t<0>` is `telemetry<>`, `pipeline_t<1>` is
/// `telemetry<buffer_exporter>`, ...
template <unsigned Mask>
using pipeline_t = basic_telemetry<pipeline_exporters_t<Mask>>;

template <unsigned Mask>
class basic_telemetry<detail::unused_pipeline<Mask>> {};

/// The mask of a set of policies.
template <class... E>
inline constexpr unsigned pipeline_mask = [] {
    constexpr std::string_view names[] = {E::name...};
    unsigned mask = 0;
    for (const auto n : names) {
        for (std::size_t i = 0; i < pipeline_policy_names.size(); ++i) {
            mask |= pipeline_policy_names[i] == n ? 1u << i : 0u;
        }
    }
    return mask;
}();

/// The precompiled pipeline of these policies, whatever order they are named in.
template <class... E>
using pipeline_of = pipeline_t<pipeline_mask<E...>>;

/// Telemetry off: every record call compiles to nothing.
using disabled_telemetry = pipeline_t<0>;
/// The flight recorder alone (the default when telemetry is enabled).
using buffer_telemetry = pipeline_of<buffer_exporter>;
/// Third-party exporters loaded from NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR.
using plugin_telemetry = pipeline_of<plugin_exporter>;
/// The Prometheus endpoint alone.
using prometheus_telemetry = pipeline_of<prometheus_exporter>;
/// The flight recorder and the Prometheus endpoint.
using buffer_prometheus_telemetry = pipeline_of<buffer_exporter, prometheus_exporter>;
/// The flight recorder and third-party plugins together.
using buffer_plugin_telemetry = pipeline_of<buffer_exporter, plugin_exporter>;

static_assert(
    std::is_same_v<buffer_prometheus_telemetry, telemetry<buffer_exporter, prometheus_exporter>>);

/// Calls X(mask) for masks 0 to 63: one `extern template` or explicit instantiation per
/// pipeline, generated instead of listed. Masks past pipeline_count name
/// detail::unused_pipeline (an empty class), so the same 64 lines serve any number of
/// built-in exporters up to five. Explicit instantiation cannot be written in a template, and
/// takes no alias as the class it names, hence a macro over numbers and pipeline_t<M> as the
/// argument of the class template it instantiates.
#define XTEL_PIPELINE_MASKS_4(X, base) X(base) X(base + 1) X(base + 2) X(base + 3)
#define XTEL_PIPELINE_MASKS_16(X, base) \
    XTEL_PIPELINE_MASKS_4(X, base)      \
    XTEL_PIPELINE_MASKS_4(X, base + 4)  \
    XTEL_PIPELINE_MASKS_4(X, base + 8) XTEL_PIPELINE_MASKS_4(X, base + 12)
#define XTEL_FOR_EACH_PIPELINE_MASK(X) \
    XTEL_PIPELINE_MASKS_16(X, 0)       \
    XTEL_PIPELINE_MASKS_16(X, 16)      \
    XTEL_PIPELINE_MASKS_16(X, 32) XTEL_PIPELINE_MASKS_16(X, 48)
inline constexpr unsigned pipeline_mask_capacity = 64;
static_assert(pipeline_count <= pipeline_mask_capacity,
              "more pipelines than XTEL_FOR_EACH_PIPELINE_MASK covers: add a "
              "XTEL_PIPELINE_MASKS_16 line per 16 masks, and raise pipeline_mask_capacity");

#define XTEL_EXTERN_TELEMETRY(mask) \
    extern template class basic_telemetry<pipeline_exporters_t<mask>>;
XTEL_FOR_EACH_PIPELINE_MASK(XTEL_EXTERN_TELEMETRY)
#undef XTEL_EXTERN_TELEMETRY

}  // namespace xtel
