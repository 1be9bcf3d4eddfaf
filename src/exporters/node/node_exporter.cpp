#include "xtel/exporters/node.hpp"

#include <unistd.h>

#include "core/log.hpp"
#include "core/owned_file.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"
#include "xtel/node/notice.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel {

namespace {

node::unpublished_reason reason_of(detail::create_failure f) {
    switch (f) {
        case detail::create_failure::name_taken:
            return node::unpublished_reason::name_taken;
        case detail::create_failure::path_blocked:
            return node::unpublished_reason::path_blocked;
        case detail::create_failure::no_space:
            return node::unpublished_reason::no_space;
        case detail::create_failure::other:
            break;
    }
    return node::unpublished_reason::create_failed;
}

}  // namespace

node_settings node_settings::from_env(const config& cfg, const env_lookup& lookup) {
    node_settings s;
    if (takes_output_path(cfg, output_path_as)) {
        s.directory = parse::existing_directory(cfg.output_path_variable, cfg.output_path);
    }
    s.spans = trace::sampler_settings::from_env(lookup);
    return s;
}

node_exporter::node_exporter(const metric_state_context<metric_state>& m,
                             const std::optional<node_settings>& given)
    : model_(m.state) {
    const exporter_context& ctx = m.ctx;
    const node_settings settings = given ? *given : node_settings::from_env(ctx.cfg);
    model_->reserve_reader_labels();
    directory_ = settings.directory;
    agent_name_ = ctx.agent_name;
    try {
        writer_ = std::make_unique<node::file::writer>(settings.directory, ctx.agent_name);
        path_ = writer_->path();
    } catch (const error& e) {
        const auto* owned = dynamic_cast<const detail::owned_file_error*>(&e);
        detail::log(log_level::error,
                    "agent '{}': node exporter off: {}; transfers go on, their metrics are not "
                    "published for the node",
                    ctx.agent_name, e.what());
        disabled_.store(true, std::memory_order_relaxed);
        // An agent name that cannot name a file cannot name a notice either.
        if (dynamic_cast<const config_error*>(&e) == nullptr) {
            leave_notice(
                owned ? reason_of(owned->reason()) : node::unpublished_reason::create_failed,
                e.what());
        }
        return;
    }
    if (settings.spans.spans()) {
        try {
            spans_ = std::make_unique<trace::span_ring::writer>(settings.directory, ctx.agent_name);
        } catch (const std::exception& e) {
            // The metrics are published all the same; only the spans are missing.
            detail::log(log_level::error,
                        "agent '{}': no spans: {}; its metrics are published, its transfers make "
                        "no spans",
                        ctx.agent_name, e.what());
        }
    }
    publish();  // the families at 0, so that a reader sees the agent from its start
}

std::filesystem::path node_exporter::spans_path() const {
    return spans_ ? spans_->path() : std::filesystem::path{};
}

node_exporter::~node_exporter() = default;

void node_exporter::leave_notice(node::unpublished_reason reason, std::string_view why) noexcept {
    try {
        node::notice n;
        n.agent_name = agent_name_;
        n.pid = static_cast<std::uint32_t>(::getpid());
        n.node_file = (directory_ / (agent_name_ + std::string(node::file::file_suffix))).string();
        n.reason = std::string(node::to_string(reason));
        n.error = std::string(why);
        notice_ = std::make_unique<node::notice_writer>(directory_, n);
        detail::log(log_level::warning, "agent '{}': left {} for the node: {}", agent_name_,
                    notice_->path().string(), n.reason);
    } catch (const std::exception& e) {
        detail::log(log_level::error, "agent '{}': {}; nothing at node level shows it", agent_name_,
                    e.what());
    }
}

bool node_exporter::export_spans(std::span<const span_stage::span_type> spans) {
    return spans_ && spans_->write(spans);
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
    spans_.reset();   // and the span ring
    notice_.reset();  // a clean stop: nothing is left to report
}

void node_exporter::publish() {
    auto snap = model_->latest();
    if (!snap || snap == last_) {
        return;  // nothing changed since the last snapshot written
    }
    // Its readers add these labels to every series themselves (a pid of the agent's own would
    // be there twice); builders are refused them (reserve_reader_labels), so only
    // xtel_agent_info's pid is left out.
    metrics::encode_snapshot(*snap, encoded_, metrics::reserved_label_names);
    if (!writer_->publish(encoded_)) {
        if (writer_->failed()) {
            disabled_.store(true, std::memory_order_relaxed);  // the writer logged why
            leave_notice(node::unpublished_reason::file_lost, writer_->failure());
        }
        return;
    }
    last_ = std::move(snap);
    published_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace xtel
