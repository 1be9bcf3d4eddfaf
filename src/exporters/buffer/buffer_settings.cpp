// The buffer exporter's settings (xtel/exporters/buffer_settings.hpp).
#include "xtel/exporters/buffer_settings.hpp"

#include "xtel/core/parse.hpp"

namespace xtel {

buffer_settings buffer_settings::from_env(const config& cfg, const env_lookup& /*lookup*/) {
    buffer_settings s;
    // A directory named there that does not exist is a configuration error, found at start-up:
    // config::from_env checks it before any exporter is built, and this check covers a config
    // made by hand.
    if (takes_output_path(cfg, output_path_as)) {
        s.directory = parse::existing_directory(cfg.output_path_variable, cfg.output_path);
    }
    return s;
}

}  // namespace xtel
