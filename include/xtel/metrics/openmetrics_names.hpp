#pragma once
/// Which names a family takes in an OpenMetrics body, where a counter's family name has no
/// _total and each type claims suffixes of its own (a gauge `x` and a counter `x_total` are both
/// family `x` there). One rule, for the renderer and for the store that refuses a family at its
/// declaration, so that no family is left out of a body: a counter whose OpenMetrics names are
/// taken is shown as type `unknown` under its full name, the name its samples have in both
/// formats, so every query of it matches (docs/metrics.md, "One name in every format").

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "xtel/metrics/metric_store.hpp"

namespace xtel::metrics {

/// How an OpenMetrics body shows a family.
enum class openmetrics_form : std::uint8_t {
    typed,     ///< with its type (a counter under its name less _total)
    unknown,   ///< type unknown, under its full name: a counter whose typed names are taken
    left_out,  ///< none of its names is free (the store refuses such a family)
};

/// The family name OpenMetrics gives a family of `type` in its TYPE, UNIT and HELP lines: a
/// counter's without its _total.
std::string_view openmetrics_family_name(std::string_view name, metric_type type) noexcept;

/// Every name an OpenMetrics body may give the lines of a family: its typed names and, for a
/// counter, its full name (the `unknown` form). Two families none of whose names are shared
/// cannot clash.
std::vector<std::string> openmetrics_candidates(std::string_view name, metric_type type);

/// The names families claim, in the order they are shown (by name, as the renderer goes).
class openmetrics_claims {
  public:
    /// Claims the names of the family `name` of `type` and says how it is shown; nothing is
    /// claimed for a family left out.
    openmetrics_form claim(std::string_view name, metric_type type);

  private:
    bool free(std::string_view base, std::span<const std::string_view> suffixes) const;
    std::unordered_set<std::string> claimed_;
    std::string scratch_;
};

/// The first family of `families` (name and type; any order) that an OpenMetrics body would leave
/// out, with the family whose names it wanted; nullopt when every family is shown.
struct openmetrics_clash {
    std::string left_out;
    std::string holder;
};
std::optional<openmetrics_clash> find_openmetrics_clash(
    std::span<const std::pair<std::string_view, metric_type>> families);

}  // namespace xtel::metrics
