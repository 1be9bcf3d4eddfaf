// The one place that decides which exporter takes NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH
// (xtel/exporters/output_path.hpp), from what each built-in exporter's settings declare.
#include "xtel/exporters/output_path.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <vector>

#include "xtel/core/parse.hpp"
#include "xtel/exporters/pipelines.hpp"

namespace xtel {

namespace {

struct claim {
    std::string_view exporter;
    output_path_use use;
};

/// The use an exporter's settings declare; none for an exporter without settings of its own.
template <class E>
constexpr output_path_use declared_use() {
    if constexpr (requires { E::settings::output_path_as; }) {
        return E::settings::output_path_as;
    } else {
        return output_path_use::none;
    }
}

template <class... E>
constexpr std::array<claim, sizeof...(E)> claims_of(exporter_list<E...> /*list*/) {
    return {claim{E::name, declared_use<E>()}...};
}

// Each built-in exporter's name with the use its settings declare, from the one list
// (xtel/exporters/pipelines.hpp). Plugins are not here: they are handed the value as it is and
// claim nothing.
constexpr auto claims = claims_of(builtin_exporters{});

output_path_use use_of(std::string_view name) {
    for (const auto& c : claims) {
        if (c.exporter == name) {
            return c.use;
        }
    }
    return output_path_use::none;
}

std::string_view described(output_path_use use) {
    switch (use) {
        case output_path_use::address:
            return "host:port";
        case output_path_use::directory:
            return "a directory";
        case output_path_use::none:
            break;
    }
    return "not read";
}

}  // namespace

output_path_use output_path_use_of(std::span<const std::string> named) {
    auto out = output_path_use::none;
    for (const auto& n : named) {
        out = std::max(out, use_of(n));
    }
    return out;
}

bool takes_output_path(const config& cfg, output_path_use use) {
    // NIXL_TELEMETRY_DIR names the flight recorder's directory and nothing else: NIXL's
    // Prometheus exporter never reads it, so here no address is taken from it either.
    const bool from_dir = std::string_view(cfg.output_path_variable) == env::telemetry_dir;
    return use != output_path_use::none && !cfg.output_path.empty() &&
           output_path_use_of(cfg.exporters) <= use &&
           (!from_dir || use == output_path_use::directory);
}

void check_output_path(std::span<const std::string> named,
                       std::string_view value,
                       std::string_view var) {
    if (value.empty()) {
        std::vector<std::string> uses;
        for (const auto& c : claims) {
            if (c.use == output_path_use::none) {
                continue;
            }
            uses.push_back(fmt::format("{} for {}", described(c.use), c.exporter));
        }
        parse::fail(var, value,
                    fmt::format("expected a non-empty value ({})", fmt::join(uses, ", ")));
    }
    // A directory is checked now rather than at the first flush. An address is parsed by the
    // exporter that takes it, when that exporter is built.
    if (output_path_use_of(named) == output_path_use::directory) {
        parse::existing_directory(var, value);
    }
}

}  // namespace xtel
