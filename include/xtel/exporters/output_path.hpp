#pragma once
/// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH: which exporter reads it, decided in one place.
///
/// NIXL has one output variable for every exporter, so its meaning depends on the exporters
/// named. Each built-in exporter's settings type declares how it reads the variable
/// (`static constexpr output_path_use output_path_as`), and of the exporters named the one whose
/// use ranks highest takes it: a directory (the flight recorder's, the meaning NIXL gives the
/// variable) over an address (the Prometheus endpoint, which has its own variable as well).
/// Exporters of a lower use then apply their own default. Plugins are handed the value as it
/// is, whatever the list (plugin::init_params_v1::output_path).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "xtel/core/config.hpp"

namespace xtel {

/// How an exporter reads NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH; later enumerators outrank earlier.
enum class output_path_use : std::uint8_t {
    none,       ///< does not read it
    address,    ///< host:port to listen on
    directory,  ///< a directory that must exist at start-up
};

/// The use the variable has for the exporter names `named` (NIXL_TELEMETRY_EXPORTER): the
/// highest of the uses the named built-in exporters declare; none when they declare none.
output_path_use output_path_use_of(std::span<const std::string> named);

/// True when an exporter whose settings declare `use` reads cfg.output_path: it is set, and no
/// exporter in cfg.exporters declares a use that outranks `use`. An exporter asks this from its
/// settings' from_env; being built, it counts as named even when cfg.exporters is empty. A value
/// from NIXL_TELEMETRY_DIR is taken only as a directory.
bool takes_output_path(const config& cfg, output_path_use use);

/// What config::from_env checks of the variable's value, before any exporter is built: that it
/// is not empty and, when its use in `named` is a directory, that the directory exists. Throws
/// config_error naming `var`, the variable the value came from (config::output_path_variable).
void check_output_path(std::span<const std::string> named,
                       std::string_view value,
                       std::string_view var = env::output_path);

}  // namespace xtel
