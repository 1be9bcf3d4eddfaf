#pragma once
/// The Prometheus text exposition format (version 0.0.4), rendered from metric snapshots
/// (private to src/).

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "xtel/metrics/snapshot.hpp"

namespace xtel::detail {

/// Escapes a label value: backslash, double quote and line feed.
std::string escape_label_value(std::string_view value);
/// Escapes HELP text: backslash and line feed.
std::string escape_help(std::string_view text);

/// Renders snapshots (of several agents) in the text exposition format: each family once with
/// its HELP and TYPE (the first snapshot's that has it), then every snapshot's series of it in
/// the order given, each snapshot's labels first. A snapshot whose family of the same name has
/// another type is left out of that family.
void render(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots, std::string& out);

}  // namespace xtel::detail
