// Reading a family's spec: its name, help, type, decimals, unit, label names, bounds and
// native settings, each refused unless every reader can serve it.

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <string>

#include "metrics/snapshot_codec_layout.hpp"
#include "metrics/snapshot_decode.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace xtel::metrics::detail::codec {

namespace {

constexpr bool reserves_snapshot_labels() {
    for (const std::string_view l : snapshot_label_names) {
        if (std::find(std::begin(reserved_label_names), std::end(reserved_label_names), l) ==
            std::end(reserved_label_names)) {
            return false;
        }
    }
    return true;
}
// So that no family label can be one of the snapshot's: a series would carry it twice.
static_assert(reserves_snapshot_labels(),
              "reserved_label_names holds every name of snapshot_label_names");

void decode_bounds(reader& r, family_spec& spec) {
    const std::size_t at = r.offset();
    const std::uint32_t n = r.count("the bound count", limits::max_bounds, 8);
    if (n != 0 && spec.type != metric_type::histogram) {
        r.fail(at, fmt::format("the bound count is {}: expected 0 (bounds only for a histogram, "
                               "this is a {})",
                               n, to_string(spec.type)));
    }
    spec.bounds.reserve(n);
    double shown_before = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::size_t b_at = r.offset();
        const double b = std::bit_cast<double>(r.u64("a bound"));
        if (std::isnan(b)) {
            r.fail(b_at, fmt::format("bound {} is NaN: expected strictly increasing numbers", i));
        }
        if (std::isinf(b)) {
            r.fail(b_at, fmt::format("bound {} is {}: expected finite bounds (the +Inf bucket is "
                                     "implied, readers add it)",
                                     i, b));
        }
        if (i > 0 && !(b > spec.bounds.back())) {
            r.fail(b_at, fmt::format("bound {} is {} after {}: expected strictly increasing bounds",
                                     i, b, spec.bounds.back()));
        }
        const double shown = shown_bound(b, spec.decimals);
        if (i > 0 && !(shown > shown_before)) {
            r.fail(b_at, fmt::format("bound {} is {} after {}: divided by 10^{} as shown, both are "
                                     "{}: expected bounds that differ as shown",
                                     i, b, spec.bounds.back(), spec.decimals, shown));
        }
        spec.bounds.push_back(b);
        shown_before = shown;
    }
}

/// Refuses what a family's label name cannot be (label `index`; those before it are read).
void check_label_name(reader& r,
                      std::size_t at,
                      std::size_t index,
                      const family_spec& spec,
                      const std::string& name) {
    if (!is_label_name(name)) {
        r.fail(at, fmt::format("label name {} {} is not a label name: expected {}", index,
                               printable(name), label_name_rule));
    }
    if (std::find(std::begin(reserved_label_names), std::end(reserved_label_names), name) !=
        std::end(reserved_label_names)) {
        r.fail(at, fmt::format("label name {} {} is reserved: every series has it from the "
                               "snapshot or the reader (agent_name, pid, rank, local_rank, "
                               "instance)",
                               index, printable(name)));
    }
    if (spec.type == metric_type::histogram && name == "le") {
        r.fail(at, fmt::format("label name {} \"le\" is refused in a histogram: its bucket lines "
                               "add le",
                               index));
    }
    if (spec.type == metric_type::summary && name == "quantile") {
        r.fail(at, fmt::format("label name {} \"quantile\" is refused in a summary: it names a "
                               "summary's quantiles",
                               index));
    }
    const auto& names = spec.label_names;
    if (const auto it = std::find(names.begin(), names.begin() + index, name);
        it != names.begin() + index) {
        r.fail(at, fmt::format("label name {} {} is label name {}'s too: expected each name once",
                               index, printable(name), it - names.begin()));
    }
}

/// Whether a family keeps native buckets, and from which schema (version 3).
void decode_native_spec(reader& r, family_spec& spec) {
    const std::size_t native_at = r.offset();
    const std::uint8_t flag = r.u8("native");
    if (flag > 1) {
        r.fail(native_at, fmt::format("native is {}: expected 0 or 1", flag));
    }
    if (flag == 1 && spec.type != metric_type::histogram) {
        r.fail(native_at, fmt::format("native is 1 on a {}: expected 0 (native buckets only for "
                                      "a histogram)",
                                      to_string(spec.type)));
    }
    spec.native = flag == 1;
    const std::size_t schema_at = r.offset();
    spec.native_schema = r.i8("native_schema");
    if (spec.native_schema < native::min_schema || spec.native_schema > native::max_schema) {
        r.fail(schema_at, fmt::format("native_schema is {}: expected {} to {}", spec.native_schema,
                                      native::min_schema, native::max_schema));
    }
}

}  // namespace

void decode_spec(reader& r,
                 std::size_t index,
                 const family_spec* previous,
                 std::uint32_t version,
                 family_spec& spec) {
    const std::size_t name_at = r.offset();
    spec.name = r.string("the name");
    if (!is_metric_name(spec.name)) {
        r.fail(name_at, fmt::format("the name {} is not a metric name: expected {}",
                                    printable(spec.name), metric_name_rule));
    }
    r.at_family(index, &spec.name);
    if (previous != nullptr && !(previous->name < spec.name)) {
        r.fail(name_at, fmt::format("the name does not sort after family {}'s {}: expected "
                                    "families sorted by name, each name once",
                                    index - 1, printable(previous->name)));
    }
    spec.help = r.string("the help");

    const std::size_t type_at = r.offset();
    const std::uint8_t type = r.u8("the type");
    if (type > static_cast<std::uint8_t>(metric_type::summary)) {
        r.fail(type_at, fmt::format("the type byte is {}: expected 0 (counter), 1 (gauge), 2 "
                                    "(histogram) or 3 (summary)",
                                    type));
    }
    spec.type = static_cast<metric_type>(type);
    // OpenMetrics shows a counter's samples as <name>_total (and the store makes no other).
    if (spec.type == metric_type::counter && !spec.name.ends_with("_total")) {
        r.fail(name_at, fmt::format("the name {} of a counter does not end in _total: expected "
                                    "a counter's name to end in _total",
                                    printable(spec.name)));
    }

    const std::size_t decimals_at = r.offset();
    spec.decimals = r.u8("the decimals");
    if (spec.decimals > 18) {
        r.fail(decimals_at, fmt::format("decimals is {}: expected 0 to 18", spec.decimals));
    }

    const std::size_t fixed_at = r.offset();
    const std::uint8_t fixed = r.u8("fixed_labels");
    if (fixed > 1) {
        r.fail(fixed_at, fmt::format("fixed_labels is {}: expected 0 or 1", fixed));
    }
    spec.fixed_labels = fixed == 1;

    const std::size_t unit_at = r.offset();
    spec.unit = r.string("the unit");
    if (!is_unit(spec.unit)) {
        r.fail(unit_at, fmt::format("the unit {} is not a unit: expected [a-zA-Z0-9_]* (empty for "
                                    "none)",
                                    printable(spec.unit)));
    }
    if (!spec.unit.empty() &&
        !unit_ends_name(spec.name, spec.unit, spec.type == metric_type::counter)) {
        r.fail(unit_at, fmt::format("the unit {} does not end the name: expected a name ending in "
                                    "_{}{}",
                                    printable(spec.unit), spec.unit,
                                    spec.type == metric_type::counter ? " (before _total)" : ""));
    }
    const std::uint32_t names = r.count("the label name count", limits::max_labels, min_string);
    spec.label_names.reserve(names);
    for (std::uint32_t i = 0; i < names; ++i) {
        const std::size_t at = r.offset();
        std::string name = r.string("a label name");
        check_label_name(r, at, i, spec, name);
        spec.label_names.push_back(std::move(name));
    }
    decode_bounds(r, spec);
    if (version >= 3) {
        decode_native_spec(r, spec);
    }
}

}  // namespace xtel::metrics::detail::codec
