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

prometheus_exporter::prometheus_exporter(const exporter_context& ctx)
    : prometheus_exporter(ctx,
                          prometheus_settings::from_env(ctx.cfg),
                          metrics::agent_metrics_settings::from_env()) {}

prometheus_exporter::prometheus_exporter(const metric_state_context<metric_state>& m)
    : prometheus_exporter(m, prometheus_settings::from_env(m.ctx.cfg)) {}

prometheus_exporter::prometheus_exporter(const exporter_context& ctx,
                                         const prometheus_settings& settings,
                                         const metrics::agent_metrics_settings& model)
    : prometheus_exporter(
          ctx, settings, std::make_shared<metric_state>(ctx.agent_name, model), true) {}

prometheus_exporter::prometheus_exporter(const metric_state_context<metric_state>& m,
                                         const prometheus_settings& settings)
    : prometheus_exporter(m.ctx, settings, m.state, false) {}

prometheus_exporter::prometheus_exporter(const exporter_context& ctx,
                                         const prometheus_settings& settings,
                                         std::shared_ptr<metric_state> model,
                                         bool folds)
    : model_(std::move(model)), folds_(folds) {
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

void prometheus_exporter::export_batch(std::span<const event> batch) {
    if (!endpoint_) {
        ignored_.fetch_add(batch.size(), std::memory_order_relaxed);
        return;
    }
    if (folds_) {
        model_->apply(batch);
    }
}

void prometheus_exporter::export_transfers(std::span<const transfer_record> transfers,
                                           const label_table& labels) {
    if (!endpoint_) {
        // Counted as the events the pipeline makes of them for event exporters, so that
        // events_lost() reads the same whichever way the transfers came.
        std::uint64_t events = 0;
        for (const transfer_record& r : transfers) {
            // A notified record (another agent's transfer) makes no event.
            events += r.notified ? 0 : detail::events_of_transfer(r.attrs.status, r.timed);
        }
        ignored_.fetch_add(events, std::memory_order_relaxed);
        return;
    }
    if (folds_) {
        model_->apply_transfers(transfers, labels);
    }
}

void prometheus_exporter::on_health(std::span<const exporter_health> rows) {
    if (endpoint_ && folds_) {
        model_->apply_health(rows);
    }
}

void prometheus_exporter::on_flush_end() {
    if (endpoint_ && folds_) {
        model_->publish();
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
