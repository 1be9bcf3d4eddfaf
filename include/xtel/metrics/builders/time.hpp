#pragma once
/// Durations accumulated per attribute set: counters of seconds, kept as exact microseconds, and
/// a counter of the transfers they were measured on, so that rate(time) / rate(timed) is the
/// mean time of any slice (an agent times a sample of its transfers: config::timing_sample).

#include <string_view>
#include <vector>

#include "xtel/metrics/builder.hpp"

namespace xtel::metrics {

/// xtel_transfer_time_seconds_total (post to completion),
/// xtel_transfer_post_time_seconds_total (the post alone) and xtel_transfer_timed_total (the
/// transfers those were measured on), labelled as the comprehensive families are. Seconds, the base
/// unit promtool asks for, shown exactly from microseconds (decimals 6): the store holds the
/// microseconds.
class time_builder {
  public:
    static constexpr std::string_view name = "time";

    void setup(metric_store& store, const attribute_registry& registry) {
        xfer_ = store.add_family({"xtel_transfer_time_seconds_total",
                                  "Seconds transfers took from post to completion, summed to the "
                                  "microsecond, by every transfer attribute.",
                                  metric_type::counter,
                                  registry.names(),
                                  6,
                                  {},
                                  "seconds"});
        post_ = store.add_family({"xtel_transfer_post_time_seconds_total",
                                  "Seconds spent posting transfers, summed to the microsecond, by "
                                  "every transfer attribute.",
                                  metric_type::counter,
                                  registry.names(),
                                  6,
                                  {},
                                  "seconds"});
        timed_ = store.add_family({"xtel_transfer_timed_total",
                                   "Transfers whose times the two time families sum, by every "
                                   "transfer attribute.",
                                   metric_type::counter, registry.names(), 0});
    }

    void build(const transfer_group& g, metric_store& store) {
        values_.clear();
        for (const field& f : g.data.fields) {
            values_.push_back(f.label);
        }
        store.add(xfer_, values_, g.totals.xfer_us);
        store.add(post_, values_, g.totals.post_us);
        store.add(timed_, values_, g.totals.timed);
    }

  private:
    family_id xfer_ = 0;
    family_id post_ = 0;
    family_id timed_ = 0;
    std::vector<std::string_view> values_;
};

}  // namespace xtel::metrics
