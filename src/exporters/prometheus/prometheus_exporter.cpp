#include "xtel/exporters/prometheus.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <limits.h>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/log.hpp"
#include "exporters/prometheus/prometheus_endpoint.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/telemetry.hpp"

namespace xtel {

prometheus_exporter::prometheus_exporter(const metric_state_context<metric_state>& m,
                                         const std::optional<prometheus_settings>& given)
    : model_(m.state) {
    const exporter_context& ctx = m.ctx;
    const prometheus_settings settings = given ? *given : prometheus_settings::from_env(ctx.cfg);
    std::shared_ptr<detail::prometheus_endpoint> endpoint;
    try {
        endpoint = detail::prometheus_endpoint::acquire(settings.address);
    } catch (const exporter_error& e) {
        detail::log(log_level::error,
                    "agent '{}': Prometheus exporter inactive: {}; transfers go on, their "
                    "metrics are not served",
                    ctx.agent_name, e.what());
        return;
    }
    if (!endpoint->attach(model_)) {
        detail::log(log_level::error,
                    "agent '{}': Prometheus exporter inactive: http://{}/metrics already serves "
                    "an agent of that name; give each agent its own name",
                    ctx.agent_name, endpoint->bound().to_string());
        return;
    }
    endpoint_ = std::move(endpoint);
}

prometheus_exporter::~prometheus_exporter() {
    if (endpoint_) {
        endpoint_->detach(model_.get());
    }
}

std::uint16_t prometheus_exporter::port() const noexcept {
    return endpoint_ ? endpoint_->bound().port : std::uint16_t{0};
}

std::string prometheus_exporter::address() const {
    return endpoint_ ? endpoint_->bound().to_string() : std::string();
}

std::string prometheus_exporter::scrape() const {
    return endpoint_ ? endpoint_->render() : std::string();
}

}  // namespace xtel
