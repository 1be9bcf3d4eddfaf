// The plugin exporter policy: one virtual call per event into each plugin, on the flusher thread.

#include <fmt/format.h>

#include <exception>

#include "core/log.hpp"
#include "exporters/plugin/plugin_descriptor.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/pipelines.hpp"  // is_builtin_exporter
#include "xtel/exporters/plugin.hpp"

namespace xtel {

struct plugin_exporter::loaded {
    std::shared_ptr<const plugin_library> library;
    /// Declared after `library`, so destroyed before it: the exporter's code lives in the library.
    std::unique_ptr<plugin::exporter_v1> exporter;
    std::string error;
    std::atomic<std::uint64_t> failures{0};
    std::atomic<std::uint64_t> lost{0};
};

plugin_exporter::plugin_exporter(const exporter_context& ctx) : agent_name_(ctx.agent_name) {
    // Built-in names (xtel/exporters/pipelines.hpp) in the same list are other policies of the
    // pipeline.
    std::vector<std::string> names;
    for (const auto& n : ctx.cfg.exporters) {
        if (!is_builtin_exporter(n)) {
            names.push_back(n);
        }
    }
    if (names.empty()) {
        throw exporter_error(
            fmt::format("the plugin exporter was chosen but {} names no plugin", env::exporter));
    }
    // Every library is loaded and checked before any exporter is built: a deployment mistake
    // stops the agent before any plugin has created a file or opened a connection.
    plugins_.reserve(names.size());
    for (const auto& plugin_name : names) {
        auto p = std::make_unique<loaded>();
        p->library = load_plugin(ctx.cfg.plugin_dir, plugin_name);
        plugins_.push_back(std::move(p));
    }
    const plugin::init_params_v1 params{ctx.cfg.output_path, ctx.agent_name, ctx.cfg.buffer_size};
    for (auto& p : plugins_) {
        try {
            p->exporter = p->library->create(params);
        } catch (const exporter_error& e) {
            // The exporter's constructor is where a plugin meets the world (files, sockets);
            // that failing is an operational condition of a third party's code, and telemetry
            // must not keep the agent from transferring. This plugin is off; the rest go on.
            p->error = e.what();
            detail::log(log_level::error,
                        "agent '{}': {}; this plugin is disabled and the agent runs without it",
                        agent_name_, p->error);
        }
    }
}

plugin_exporter::~plugin_exporter() = default;
plugin_exporter::plugin_exporter(plugin_exporter&&) noexcept = default;

void plugin_exporter::export_batch(std::span<const event> batch) noexcept {
    for (auto& p : plugins_) {
        if (!p->exporter) {
            p->lost.fetch_add(batch.size(), std::memory_order_relaxed);
            continue;
        }
        for (const event& e : batch) {
            // Caught per event: one bad event costs that event, not the rest of the batch.
            try {
                p->exporter->export_event(e);
            } catch (const std::exception& ex) {
                p->lost.fetch_add(1, std::memory_order_relaxed);
                note_failure(*p, "export_event", ex.what());
            } catch (...) {
                p->lost.fetch_add(1, std::memory_order_relaxed);
                note_failure(*p, "export_event", "something that is not a std::exception");
            }
        }
    }
}

void plugin_exporter::on_flush_end() noexcept {
    for (auto& p : plugins_) {
        if (!p->exporter) {
            continue;
        }
        try {
            p->exporter->flush();
        } catch (const std::exception& ex) {
            note_failure(*p, "flush", ex.what());
        } catch (...) {
            note_failure(*p, "flush", "something that is not a std::exception");
        }
    }
}

std::size_t plugin_exporter::active_count() const noexcept {
    std::size_t n = 0;
    for (const auto& p : plugins_) {
        n += p->exporter ? 1 : 0;
    }
    return n;
}

std::uint64_t plugin_exporter::events_lost() const noexcept {
    std::uint64_t n = 0;
    for (const auto& p : plugins_) {
        n += p->lost.load(std::memory_order_relaxed);
    }
    return n;
}

std::vector<plugin_status> plugin_exporter::status() const {
    std::vector<plugin_status> out;
    out.reserve(plugins_.size());
    for (const auto& p : plugins_) {
        plugin_status s;
        s.name = p->library->name();
        s.path = p->library->path();
        s.version = p->library->version();
        s.active = p->exporter != nullptr;
        s.error = p->error;
        s.failures = p->failures.load(std::memory_order_relaxed);
        s.events_lost = p->lost.load(std::memory_order_relaxed);
        out.push_back(std::move(s));
    }
    return out;
}

void plugin_exporter::note_failure(loaded& p,
                                   std::string_view call,
                                   std::string_view what) noexcept {
    // The first failure is logged, later ones only counted: a plugin that fails on every event
    // must not write a log line per event.
    if (p.failures.fetch_add(1, std::memory_order_relaxed) != 0) {
        return;
    }
    detail::log(log_level::error,
                "agent '{}': telemetry exporter plugin '{}' ({}): {}() threw: {} (further "
                "failures are counted, not logged; transfers are not affected)",
                agent_name_, p.library->name(), p.library->path().string(), call,
                detail::printable(what));
}

}  // namespace xtel
