#include "core/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "xtel/core/ascii.hpp"

namespace xtel::detail {

namespace {

/// Edits from `a` to `b` ignoring case (optimal string alignment distance).
std::size_t distance(std::string_view a, std::string_view b) {
    const std::size_t n = a.size(), m = b.size();
    // Three rows: the one before the previous is needed for a swap of adjacent characters.
    std::vector<std::size_t> before(m + 1), previous(m + 1), row(m + 1);
    for (std::size_t j = 0; j <= m; ++j) {
        previous[j] = j;
    }
    for (std::size_t i = 1; i <= n; ++i) {
        row[0] = i;
        for (std::size_t j = 1; j <= m; ++j) {
            const bool same = ascii::lower(a[i - 1]) == ascii::lower(b[j - 1]);
            row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (same ? 0 : 1)});
            if (i > 1 && j > 1 && ascii::lower(a[i - 1]) == ascii::lower(b[j - 2]) &&
                ascii::lower(a[i - 2]) == ascii::lower(b[j - 1])) {
                row[j] = std::min(row[j], before[j - 2] + 1);
            }
        }
        std::swap(before, previous);
        std::swap(previous, row);
    }
    return previous[m];
}

}  // namespace

bool same_keyword(std::string_view a, std::string_view b) noexcept {
    return ascii::equals_ignoring_case(a, b);
}

}  // namespace xtel::detail

namespace xtel {

std::optional<std::string_view> nearest(std::string_view value,
                                        std::span<const std::string_view> choices) {
    // Values far longer than any keyword are no typo of one, and are not worth the work.
    if (value.empty() || value.size() > 64) {
        return std::nullopt;
    }
    const std::size_t allowed = value.size() <= 4 ? 1 : 2;
    std::optional<std::string_view> best;
    std::size_t best_distance = allowed + 1;
    for (const std::string_view c : choices) {
        const std::size_t d = detail::distance(value, c);
        if (d < best_distance) {
            best = c;
            best_distance = d;
        }
    }
    return best;
}

std::string did_you_mean(std::string_view value, std::span<const std::string_view> choices) {
    const auto n = nearest(value, choices);
    return n ? fmt::format(" (did you mean '{}'?)", *n) : std::string();
}

}  // namespace xtel
