#include "xtel/push/remote_write.hpp"

#include <fmt/format.h>
#include <snappy.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prometheus_remote_write.pb.h"
#include "push/scaled.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace xtel::push {

namespace {

using metrics::metric_type;

/// Builds one series' labels, sorted by name as remote write requires.
class series_builder {
  public:
    series_builder(prompb::WriteRequest& request,
                   std::int64_t timestamp_ms,
                   std::span<const metrics::label> external)
        : request_(request), timestamp_ms_(timestamp_ms), external_(external) {}

    /// The labels every series of `f` in snapshot `snap` has, but __name__ and le, sorted once
    /// for all the lines of the series.
    void start(const metrics::snapshot& snap,
               const metrics::family_snapshot& f,
               const metrics::series& s) {
        base_.clear();
        for (const metrics::label& l : snap.labels) {
            base_.emplace_back(l.name, metrics::to_valid_utf8(l.value));
        }
        const auto& names = f.spec.label_names;
        for (std::size_t i = 0; i < names.size() && i < s.label_values.size(); ++i) {
            base_.emplace_back(names[i], metrics::to_valid_utf8(s.label_values[i]));
        }
        const std::size_t own = base_.size();
        for (const metrics::label& l : external_) {
            const auto mine = base_.begin() + static_cast<std::ptrdiff_t>(own);
            if (std::none_of(base_.begin(), mine,
                             [&](const auto& b) { return b.first == l.name; })) {
                base_.emplace_back(l.name, l.value);
            }
        }
        std::sort(base_.begin(), base_.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
    }

    /// Adds the series `name` (with `le` when not empty) with one sample.
    void add(const std::string& name, const std::string& le, double value) {
        prompb::Sample& sample = *add_series(name, le).add_samples();
        sample.set_value(value);
        sample.set_timestamp(timestamp_ms_);
    }

    /// Adds the series `name` with one native histogram: `s`'s, its sum shown with `decimals`.
    void add_native(const std::string& name, const metrics::series& s, std::uint8_t decimals) {
        prompb::Histogram& h = *add_series(name, {}).add_histograms();
        h.set_count_int(s.count);
        h.set_sum(scaled(s.sum, decimals));
        h.set_schema(s.native_schema);
        h.set_zero_threshold(metrics::native::zero_threshold);
        h.set_zero_count_int(s.zero_count);
        metrics::native::to_spans(s.native_first, s.native_buckets, spans_, deltas_);
        for (const metrics::native::bucket_span& span : spans_) {
            prompb::BucketSpan& out = *h.add_positive_spans();
            out.set_offset(span.offset);
            out.set_length(span.length);
        }
        for (const std::int64_t d : deltas_) {
            h.add_positive_deltas(d);
        }
        // The values are cumulative since the agent started; whether it started again since the
        // last push only the receiver can tell, by comparing (as it does for a counter).
        h.set_reset_hint(prompb::Histogram::RESET_HINT_UNKNOWN);
        h.set_timestamp(timestamp_ms_);
    }

  private:
    /// A new series of the current labels with `name` and (when not empty) `le`.
    prompb::TimeSeries& add_series(const std::string& name, const std::string& le) {
        prompb::TimeSeries& ts = *request_.add_timeseries();
        // base_ is sorted: __name__ and le go in where they sort, in one pass.
        bool name_added = false;
        bool le_added = le.empty();
        const auto put = [&ts](const std::string& n, const std::string& v) {
            prompb::Label& l = *ts.add_labels();
            l.set_name(n);
            l.set_value(v);
        };
        for (const auto& [n, v] : base_) {
            if (!name_added && std::string_view("__name__") < n) {
                put("__name__", name);
                name_added = true;
            }
            if (!le_added && std::string_view("le") < n) {
                put("le", le);
                le_added = true;
            }
            put(n, v);
        }
        if (!name_added) {
            put("__name__", name);
        }
        if (!le_added) {
            put("le", le);
        }
        return ts;
    }

    prompb::WriteRequest& request_;
    std::int64_t timestamp_ms_;
    std::span<const metrics::label> external_;
    std::vector<std::pair<std::string, std::string>> base_;
    std::vector<metrics::native::bucket_span> spans_;  ///< scratch
    std::vector<std::int64_t> deltas_;                 ///< scratch
};

void add_family(series_builder& out,
                const metrics::snapshot& snap,
                const metrics::family_snapshot& f) {
    const auto& spec = f.spec;
    std::vector<std::string> le;
    if (spec.type == metric_type::histogram) {
        for (const double b : spec.bounds) {
            le.push_back(metrics::format_bound(b, spec.decimals));
        }
    }
    const std::string none;
    for (const metrics::series& s : f.series) {
        out.start(snap, f, s);
        switch (spec.type) {
            case metric_type::counter:
            case metric_type::gauge:
                out.add(spec.name, none, scaled(s.value, spec.decimals));
                break;
            case metric_type::histogram: {
                // A native histogram is one series under the family's name, as Prometheus
                // stores one it scrapes. Kept in both forms, the classic series come too, under
                // the _bucket, _sum and _count names, which cannot collide with it: what
                // Prometheus keeps of a scrape with scrape_classic_histograms (2.42 has no such
                // option and keeps the native form alone).
                if (spec.native) {
                    out.add_native(spec.name, s, spec.decimals);
                    if (spec.bounds.empty()) {
                        break;
                    }
                }
                const std::string bucket = spec.name + "_bucket";
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i < le.size() && i < s.buckets.size(); ++i) {
                    cumulative += s.buckets[i];
                    out.add(bucket, le[i], static_cast<double>(cumulative));
                }
                out.add(bucket, "+Inf", static_cast<double>(s.count));
                [[fallthrough]];
            }
            case metric_type::summary:
                out.add(spec.name + "_sum", none, scaled(s.sum, spec.decimals));
                out.add(spec.name + "_count", none, static_cast<double>(s.count));
                break;
        }
    }
}

}  // namespace

std::string encode_write_request(
    std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
    std::int64_t timestamp_ms,
    std::span<const metrics::label> external_labels) {
    prompb::WriteRequest request;
    series_builder out(request, timestamp_ms, external_labels);
    // A name is one family of one type: the first snapshot's that has it, as a scrape shows.
    std::unordered_map<std::string_view, metric_type> types;
    for (const auto& snap : snapshots) {
        for (const metrics::family_snapshot& f : snap->families) {
            const auto [at, added] = types.emplace(f.spec.name, f.spec.type);
            if (added || at->second == f.spec.type) {
                add_family(out, *snap, f);
            }
        }
    }
    const std::string serialized = request.SerializeAsString();
    std::string compressed;
    snappy::Compress(serialized.data(), serialized.size(), &compressed);
    return compressed;
}

namespace {

push_options remote_write_push_options(const remote_write_options& o) {
    push_options p;
    p.what = "remote write";
    p.headers = {"Content-Encoding: snappy", "Content-Type: application/x-protobuf",
                 "X-Prometheus-Remote-Write-Version: 0.1.0"};
    p.queue_capacity = o.queue_capacity;
    p.timeout = o.timeout;
    p.max_backoff = o.max_backoff;
    return p;
}

}  // namespace

remote_writer::remote_writer(std::string url, remote_write_options o)
    : http_pusher(std::move(url), remote_write_push_options(o)) {}

}  // namespace xtel::push
