#pragma once
// Helpers shared by the Prometheus exporter's unit tests.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/core/event.hpp"
#include "xtel/core/log.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/exporters/prometheus.hpp"

namespace prom_test {

/// What the pipeline hands an exporter that takes transfer records (as the Prometheus exporter
/// does): the records, then the events not derived from them. The events it derives from the
/// records (agent_tx_bytes...) go only to exporters without export_transfers.
struct transfer_round {
    std::vector<xtel::transfer_record> transfers;
    std::vector<xtel::event> events;
};

/// An exporter on a free loopback port with fixed labels and two buckets, built the way the
/// pipeline builds it (from the model it serves), and the model, which the test folds and
/// publishes as the back end does (xtel/core/back_end.hpp): the exporter never folds.
struct exporter_under_test {
    explicit exporter_under_test(std::string agent = "a1",
                                 std::vector<double> buckets = {10, 100},
                                 std::string address = "127.0.0.1:0")
        : metrics(std::make_shared<xtel::metrics::agent_metrics>(agent, model(std::move(buckets)))),
          exporter({{cfg, std::move(agent)}, metrics}, settings(address)) {}

    static xtel::prometheus_settings settings(std::string_view address) {
        xtel::prometheus_settings s;
        s.address = xtel::host_port::parse("test", address);
        return s;
    }

    static xtel::metrics::agent_metrics_settings model(std::vector<double> buckets) {
        xtel::metrics::agent_metrics_settings s;
        s.buckets = std::move(buckets);
        s.hostname = "h";
        // Both sets, so that one exporter shows every family these tests check (the default,
        // the xtel set alone, is metric_surface_test's).
        s.sets = xtel::metrics::family_sets::both;
        return s;
    }

    /// Folds `events` as one flush round.
    void flush(const std::vector<xtel::event>& events) {
        metrics->apply(events);
        end_round();
    }

    /// Folds transfers as the back end does, in one flush round.
    void flush(const transfer_round& round) {
        send(round);
        end_round();
    }

    /// Folds transfers without ending the flush round: the records, then the other events.
    void send(const transfer_round& round) {
        metrics->apply_transfers(round.transfers, labels);
        metrics->apply(round.events);
    }

    /// Ends the flush round: what it folded is published, for scrapes to see.
    void end_round() { metrics->publish(); }

    xtel::config cfg;
    xtel::label_table labels;
    std::shared_ptr<xtel::metrics::agent_metrics> metrics;
    xtel::prometheus_exporter exporter;
};

inline xtel::event make(xtel::category cat,
                        std::string_view name,
                        std::uint64_t value,
                        xtel::value_kind kind) {
    xtel::event e;
    e.timestamp_us = 1;
    e.cat = cat;
    e.name = name;
    e.value = value;
    e.kind = kind;
    return e;
}

/// A completed, timed transfer of `requests` requests, as the pipeline hands it to the
/// Prometheus exporter: the record alone; its attributes are the defaults (label ids unknown).
inline transfer_round transfer(xtel::direction dir,
                               std::uint64_t bytes,
                               std::uint64_t requests,
                               std::uint64_t post_us,
                               std::uint64_t xfer_us) {
    const bool tx = dir == xtel::direction::tx;
    xtel::transfer_record r;
    r.timestamp_us = 1;
    r.bytes = bytes;
    r.requests = requests;
    r.post_us = post_us;
    r.xfer_us = xfer_us;
    r.dir = dir;
    r.attrs.op = tx ? xtel::transfer_op::write : xtel::transfer_op::read;
    return {{r}, {}};
}

/// One completed transmit, as the pipeline hands it over.
inline transfer_round tx_transfer(std::uint64_t bytes,
                                  std::uint64_t post_us,
                                  std::uint64_t xfer_us) {
    return transfer(xtel::direction::tx, bytes, 1, post_us, xfer_us);
}

/// Collects xtel's log messages while alive.
class log_capture {
  public:
    log_capture() {
        xtel::set_log_sink([this](xtel::log_level level, std::string_view message) {
            const std::lock_guard lock(mutex_);
            messages_.emplace_back(level, std::string(message));
        });
    }
    ~log_capture() { xtel::set_log_sink({}); }

    log_capture(const log_capture&) = delete;
    log_capture& operator=(const log_capture&) = delete;

    /// The first message at `level` that contains `part`; empty when none.
    std::string find(xtel::log_level level, std::string_view part) const {
        const std::lock_guard lock(mutex_);
        for (const auto& [l, m] : messages_) {
            if (l == level && m.find(part) != std::string::npos) {
                return m;
            }
        }
        return {};
    }

  private:
    mutable std::mutex mutex_;
    std::vector<std::pair<xtel::log_level, std::string>> messages_;
};

/// Lines of `text` from the one that starts with `first` up to and including the one that
/// starts with `last`; empty when either is missing.
inline std::string block(const std::string& text, std::string_view first, std::string_view last) {
    const auto begin = text.find(std::string(first));
    if (begin == std::string::npos || (begin != 0 && text[begin - 1] != '\n')) {
        return {};
    }
    auto end = text.find(std::string("\n") + std::string(last), begin);
    if (end == std::string::npos) {
        return {};
    }
    end = text.find('\n', end + 1);
    return end == std::string::npos ? std::string() : text.substr(begin, end + 1 - begin);
}

/// `text` with the value of every process_* sample replaced by "V": the process metrics
/// (CPU time, open descriptors) change between two scrapes of the same snapshots.
inline std::string without_process_values(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    std::size_t at = 0;
    while (at < text.size()) {
        auto end = text.find('\n', at);
        end = end == std::string::npos ? text.size() : end + 1;
        const std::string_view line(text.data() + at, end - at);
        const auto space = line.rfind(' ');
        if (line.starts_with("process_") && space != std::string_view::npos) {
            out.append(line.substr(0, space + 1));
            out += "V\n";
        } else {
            out.append(line);
        }
        at = end;
    }
    return out;
}

}  // namespace prom_test
