// The Prometheus exporter's settings: the endpoint's address.
#include "xtel/exporters/prometheus_settings.hpp"

namespace xtel {

prometheus_settings prometheus_settings::from_env(const config& cfg, const env_lookup& lookup) {
    prometheus_settings s;
    if (const auto v = lookup(env::prometheus_address)) {
        s.address = host_port::parse(env::prometheus_address, *v);
    } else if (takes_output_path(cfg, output_path_as)) {
        s.address = host_port::parse(env::output_path, cfg.output_path);
    }
    return s;
}

}  // namespace xtel
