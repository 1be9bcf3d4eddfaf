#pragma once
// A test exporter policy: keeps every batch it is handed, so tests can assert on exactly what a
// real pipeline delivered. Sinks are looked up by agent name and outlive the pipeline.

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "xtel/core/error.hpp"
#include "xtel/core/exporter.hpp"
#include "xtel/core/transfer_record.hpp"

namespace xtel_test {

struct sink {
    std::mutex mutex;
    std::vector<xtel::event> events;
    std::size_t batches = 0;
    std::size_t flush_ends = 0;
    bool stopped = false;
    int throw_next = 0;  ///< this many export_batch calls throw before events are taken

    std::vector<xtel::event> snapshot() {
        const std::lock_guard lock(mutex);
        return events;
    }
};

inline std::shared_ptr<sink> sink_for(const std::string& agent) {
    static std::mutex m;
    static std::map<std::string, std::shared_ptr<sink>> sinks;
    const std::lock_guard lock(m);
    auto& s = sinks[agent];
    if (!s) {
        s = std::make_shared<sink>();
    }
    return s;
}

inline void reset_sink(const std::string& agent) {
    auto s = sink_for(agent);
    const std::lock_guard lock(s->mutex);
    s->events.clear();
    s->batches = 0;
    s->flush_ends = 0;
    s->stopped = false;
    s->throw_next = 0;
}

class collecting_exporter {
  public:
    static constexpr std::string_view name = "collecting";

    explicit collecting_exporter(const xtel::exporter_context& ctx)
        : sink_(sink_for(ctx.agent_name)) {
        if (ctx.agent_name == "refuse-me") {
            throw xtel::exporter_error("collecting exporter refuses agent 'refuse-me'");
        }
    }

    void export_batch(std::span<const xtel::event> batch) {
        const std::lock_guard lock(sink_->mutex);
        if (sink_->throw_next > 0) {
            --sink_->throw_next;
            throw std::runtime_error("disk on fire");
        }
        sink_->events.insert(sink_->events.end(), batch.begin(), batch.end());
        ++sink_->batches;
    }

    void on_flush_end() {
        const std::lock_guard lock(sink_->mutex);
        ++sink_->flush_ends;
    }

    void on_stop() {
        const std::lock_guard lock(sink_->mutex);
        sink_->stopped = true;
    }

  private:
    std::shared_ptr<sink> sink_;
};

static_assert(xtel::exporter<collecting_exporter>);

/// Keeps whole transfers, request ids copied (the views die with the call).
class record_keeper {
  public:
    static inline std::vector<xtel::transfer_record> records;
    static inline std::vector<std::string> ids;
    static inline std::vector<std::string> peers;
    static inline std::size_t events = 0;
    static inline std::size_t rounds = 0;

    static void clear() {
        records.clear();
        ids.clear();
        peers.clear();
        events = 0;
        rounds = 0;
    }

    explicit record_keeper(const xtel::exporter_context&) {}
    void export_batch(std::span<const xtel::event> b) { events += b.size(); }
    void export_transfers(std::span<const xtel::transfer_record> t, const xtel::label_table& l) {
        for (const auto& r : t) {
            records.push_back(r);
            ids.emplace_back(r.request_id);
            peers.emplace_back(l.name(r.attrs.remote_agent));
        }
    }
    void on_flush_end() { ++rounds; }
};

}  // namespace xtel_test
