#include "xtel/exporters/node.hpp"

#include "core/log.hpp"
#include "exporters/prometheus/prometheus_agent.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace xtel {

node_settings node_settings::from_env(const config& cfg, const env_lookup& lookup) {
    node_settings s;
    if (takes_output_path(cfg, output_path_as)) {
        s.directory = parse::existing_directory(env::output_path, cfg.output_path);
    }
    s.metrics = prometheus_settings::from_env(cfg, lookup);
    return s;
}

node_exporter::node_exporter(const exporter_context& ctx)
    : node_exporter(ctx, node_settings::from_env(ctx.cfg)) {}

node_exporter::node_exporter(const exporter_context& ctx, const node_settings& settings)
    : agent_(std::make_shared<detail::prometheus_agent>(ctx.agent_name,
                                                        settings.metrics.hostname,
                                                        settings.metrics.buckets,
                                                        settings.metrics.builders,
                                                        settings.metrics.max_series,
                                                        settings.metrics.rank,
                                                        detail::pid_shown_by::reader)) {
    try {
        writer_ = std::make_unique<node::file::writer>(settings.directory, ctx.agent_name);
        path_ = writer_->path();
    } catch (const error& e) {
        detail::log(log_level::error,
                    "agent '{}': node exporter off: {}; transfers go on, their metrics are not "
                    "published for the node",
                    ctx.agent_name, e.what());
        disabled_.store(true, std::memory_order_relaxed);
        return;
    }
    publish();  // the families at 0, so that a reader sees the agent from its start
}

node_exporter::~node_exporter() = default;

void node_exporter::export_batch(std::span<const event> batch) {
    if (disabled()) {
        lost_.fetch_add(batch.size(), std::memory_order_relaxed);
        return;
    }
    agent_->apply(batch);
}

void node_exporter::export_transfers(std::span<const transfer_record> transfers,
                                     const label_table& labels) {
    if (disabled()) {
        std::uint64_t events = 0;
        for (const transfer_record& r : transfers) {
            events += detail::events_of_transfer(r.attrs.status, r.timed);
        }
        lost_.fetch_add(events, std::memory_order_relaxed);
        return;
    }
    agent_->apply_transfers(transfers, labels);
}

void node_exporter::on_health(std::span<const exporter_health> rows) {
    if (!disabled()) {
        agent_->apply_health(rows);
    }
}

void node_exporter::on_flush_end() {
    if (!disabled()) {
        publish();
    }
}

void node_exporter::on_stop() {
    if (!disabled()) {
        publish();
    }
    writer_.reset();  // marks the file closed
}

void node_exporter::publish() {
    agent_->publish();
    auto snap = agent_->snapshot();
    if (!snap || snap == last_) {
        return;  // nothing changed since the last snapshot written
    }
    metrics::encode_snapshot(*snap, encoded_);
    if (!writer_->publish(encoded_)) {
        if (writer_->failed()) {
            disabled_.store(true, std::memory_order_relaxed);  // the writer logged why
        }
        return;
    }
    last_ = std::move(snap);
    published_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace xtel
