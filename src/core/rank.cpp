// The process's rank from the launcher's variables (xtel/core/rank.hpp).
#include "xtel/core/rank.hpp"

#include <limits>
#include <span>
#include <string>

#include "core/log.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"

namespace xtel {

namespace {

/// The value of the first of `variables` that holds a rank; a variable that holds something
/// else is logged and passed over.
std::optional<std::uint64_t> first_rank(std::span<const char* const> variables,
                                        std::string_view label,
                                        const env_lookup& lookup) {
    for (const char* var : variables) {
        const auto value = lookup(var);
        if (!value) {
            continue;
        }
        try {
            return parse::unsigned_integer(var, *value, 0,
                                           std::numeric_limits<std::uint64_t>::max());
        } catch (const config_error&) {
            detail::log(log_level::warning,
                        "{}='{}' is ignored: expected a non-negative decimal integer; no {} "
                        "label comes from it",
                        var, *value, label);
        }
    }
    return std::nullopt;
}

}  // namespace

process_rank process_rank::from_env(const env_lookup& lookup) {
    process_rank r;
    try {
        r.rank = first_rank(env::rank_variables, "rank", lookup);
        r.local_rank = first_rank(env::local_rank_variables, "local_rank", lookup);
    } catch (const std::exception& e) {
        // Only a lookup that throws (no memory): the agent goes on without the labels.
        detail::log(log_level::warning, "the rank variables could not be read: {}", e.what());
    }
    return r;
}

}  // namespace xtel
