// The process's rank from the launcher's variables (xtel/core/rank.hpp).
#include "xtel/core/rank.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
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

/// Whether `name` can be an environment variable's name as a shell sets it: letters, digits
/// and '_', not starting with a digit.
bool is_variable_name(std::string_view name) {
    const auto word = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    };
    return !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front())) &&
           std::all_of(name.begin(), name.end(), word);
}

/// The local rank from the variable NIXL_TELEMETRY_RANK_ENV names, as NIXL reads it, or from
/// env::local_rank_variables when it is unset or names no variable.
std::optional<std::uint64_t> local_rank_of(const env_lookup& lookup) {
    if (const auto named = lookup(env::rank_env)) {
        if (named->empty()) {
            return std::nullopt;  // NIXL: an empty name asks for no label
        }
        if (is_variable_name(*named)) {
            const char* const only[] = {named->c_str()};
            return first_rank(only, "local_rank", lookup);
        }
        detail::log(log_level::warning,
                    "{}='{}' is ignored: expected the name of an environment variable (letters, "
                    "digits, '_'); the local rank is looked for in {}",
                    env::rank_env, parse::escape_controls(*named),
                    fmt::join(env::local_rank_variables, ", "));
    }
    return first_rank(env::local_rank_variables, "local_rank", lookup);
}

}  // namespace

process_rank process_rank::from_env(const env_lookup& lookup) {
    process_rank r;
    try {
        r.rank = first_rank(env::rank_variables, "rank", lookup);
        r.local_rank = local_rank_of(lookup);
    } catch (const std::exception& e) {
        // Only a lookup that throws (no memory): the agent goes on without the labels.
        detail::log(log_level::warning, "the rank variables could not be read: {}", e.what());
    }
    return r;
}

}  // namespace xtel
