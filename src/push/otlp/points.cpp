#include "push/otlp/points.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "push/otlp/attributes.hpp"
#include "push/scaled.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/trace/context.hpp"

namespace xtel::push::detail {

namespace {

namespace pb = xtel::otlp;

/// OTLP units are UCUM codes: the two base units the metric model uses, in UCUM; any other
/// unit (already a code, or a word UCUM would write in braces) as given.
std::string ucum(std::string_view unit) {
    if (unit == "seconds") {
        return "s";
    }
    if (unit == "bytes") {
        return "By";
    }
    return std::string(unit);
}

/// A point's value: an integer when the family keeps whole units and it fits, else the double
/// a scrape shows.
template <class Point>
void set_value(Point& p, std::uint64_t v, std::uint8_t decimals) {
    if (decimals == 0 &&
        v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        p.set_as_int(static_cast<std::int64_t>(v));
    } else {
        p.set_as_double(scaled(v, decimals));
    }
}

template <class Point>
void add_exemplar(Point& p, const metrics::exemplar& e, std::uint8_t decimals) {
    pb::Exemplar& x = *p.add_exemplars();
    x.set_time_unix_nano(e.timestamp_us * 1000);
    set_value(x, e.value, decimals);
    // The trace the transfer's span is in, by the span's own rules (xtel/trace/context.hpp,
    // docs/trace-format.md): a traceparent gives the caller's trace and span, 32 hex digits a
    // trace, any other request id the trace derived from it, which the id stays beside. The
    // span is the transfer's own when the agent wrote one, else the caller's.
    const std::optional<trace::context> ctx = trace::context_of(e.label_value);
    if (!ctx) {
        put(*x.mutable_filtered_attributes(), e.label_name, e.label_value);
        return;
    }
    x.set_trace_id(
        std::string(reinterpret_cast<const char*>(ctx->trace.data()), ctx->trace.size()));
    if (!trace::is_zero(e.span_id)) {
        x.set_span_id(
            std::string(reinterpret_cast<const char*>(e.span_id.data()), e.span_id.size()));
    } else if (ctx->from == trace::origin::traceparent) {
        x.set_span_id(
            std::string(reinterpret_cast<const char*>(ctx->parent.data()), ctx->parent.size()));
    }
    if (ctx->from != trace::origin::derived) {
        return;  // the request id is the trace context itself
    }
    put(*x.mutable_filtered_attributes(), e.label_name, e.label_value);
}

/// The buckets of a histogram point: each bound's count less the baseline's, then the +Inf
/// bucket (what the count has beyond the others).
void add_buckets(pb::HistogramDataPoint& p,
                 const point_context& c,
                 const metrics::series& s,
                 const baseline& base) {
    std::uint64_t below_inf = 0;
    for (std::size_t i = 0; i < c.bounds.size(); ++i) {
        const std::uint64_t b = i < s.buckets.size() ? s.buckets[i] : 0;
        const std::uint64_t was = i < base.buckets.size() ? base.buckets[i] : 0;
        p.add_bucket_counts(b - was);
        below_inf += b - was;
    }
    p.add_bucket_counts(p.count() - std::min(p.count(), below_inf));
    for (const double b : c.bounds) {
        p.add_explicit_bounds(b);
    }
}

/// Only the exemplars of observations after the baseline (all of them, cumulative).
template <class Point>
void add_exemplars(Point& p,
                   const point_context& c,
                   const metrics::series& s,
                   const baseline& base) {
    for (const metrics::exemplar& e : s.exemplars) {
        if (!e.label_value.empty() && e.timestamp_us * 1000 > base.since_ns) {
            add_exemplar(p, e, c.spec.decimals);
        }
    }
}

/// The positive buckets of an exponential point: `s`'s native buckets less the baseline's, both
/// at the lower of their schemas, which is the point's scale. OTLP numbers a bucket one lower
/// than Prometheus and the metric store do (its bucket i ends at base^(i+1)), so the offset is the
/// model's first index less 1. Leading and trailing empty buckets are left out.
void add_exponential_buckets(pb::ExponentialHistogramDataPoint& p,
                             const metrics::series& s,
                             const baseline& base) {
    const native_counts now{.schema = s.native_schema,
                            .first = s.native_first,
                            .buckets = s.native_buckets,
                            .zero_count = s.zero_count};
    const bool subtract = !base.native.buckets.empty();
    const int scale = subtract ? std::min(now.schema, base.native.schema) : now.schema;
    std::vector<std::uint64_t> now_storage;
    std::vector<std::uint64_t> was_storage;
    const native_counts n = at_schema(now, scale, now_storage);
    const native_counts w = subtract ? at_schema(base.native, scale, was_storage) : native_counts{};
    p.set_scale(scale);
    p.set_zero_count(n.zero_count - std::min(n.zero_count, base.native.zero_count));
    std::vector<std::uint64_t> counts(n.buckets.begin(), n.buckets.end());
    for (std::size_t k = 0; k < w.buckets.size(); ++k) {
        const std::int64_t at =
            static_cast<std::int64_t>(w.first) + static_cast<std::int64_t>(k) - n.first;
        if (at >= 0 && at < static_cast<std::int64_t>(counts.size())) {
            auto& c = counts[static_cast<std::size_t>(at)];
            c -= std::min(c, w.buckets[k]);
        }
    }
    const auto begin = std::find_if(counts.begin(), counts.end(), [](auto c) { return c != 0; });
    if (begin == counts.end()) {
        return;  // no bucket gained: no positive buckets at all
    }
    const auto end =
        std::find_if(counts.rbegin(), counts.rend(), [](auto c) { return c != 0; }).base();
    pb::ExponentialHistogramDataPoint::Buckets& positive = *p.mutable_positive();
    positive.set_offset(n.first + static_cast<std::int32_t>(begin - counts.begin()) - 1);
    for (auto it = begin; it != end; ++it) {
        positive.add_bucket_counts(*it);
    }
}

}  // namespace

void fill_metric(pb::Metric& m, const metrics::family_spec& spec) {
    // The name a scrape shows, `_total` included: OpenTelemetry's naming would drop it from
    // a counter, but NIXL's families have a gauge and a counter that differ only by it
    // (agent_xfer_post_time and agent_xfer_post_time_total), and an OTLP to Prometheus
    // translation adds it only where it is missing.
    m.set_name(spec.name);
    m.set_description(metrics::to_valid_utf8(spec.help));
    m.set_unit(ucum(spec.unit));
}

void shown_bounds(const metrics::family_spec& spec, std::vector<double>& out) {
    out.clear();
    for (const double b : spec.bounds) {
        // + 0.0 makes a bound of -0 the 0 a scrape's le="0" reads as.
        out.push_back(metrics::shown_bound(b, spec.decimals) + 0.0);
    }
}

void add_sum_point(pb::Metric& m,
                   const point_context& c,
                   const metrics::series& s,
                   const baseline& base) {
    pb::Sum& sum = *m.mutable_sum();
    sum.set_aggregation_temporality(c.temporality);
    sum.set_is_monotonic(true);
    pb::NumberDataPoint& p = *sum.add_data_points();
    fill_attributes(p, c.spec, s);
    p.set_start_time_unix_nano(base.start_ns);
    p.set_time_unix_nano(c.now_ns);
    set_value(p, s.value - base.value, c.spec.decimals);
}

void add_gauge_point(pb::Metric& m, const point_context& c, const metrics::series& s) {
    pb::NumberDataPoint& p = *m.mutable_gauge()->add_data_points();
    fill_attributes(p, c.spec, s);
    p.set_time_unix_nano(c.now_ns);
    set_value(p, s.value, c.spec.decimals);
}

void add_histogram_point(pb::Metric& m,
                         const point_context& c,
                         const metrics::series& s,
                         const baseline& base) {
    pb::Histogram& h = *m.mutable_histogram();
    h.set_aggregation_temporality(c.temporality);
    pb::HistogramDataPoint& p = *h.add_data_points();
    fill_attributes(p, c.spec, s);
    p.set_start_time_unix_nano(base.start_ns);
    p.set_time_unix_nano(c.now_ns);
    p.set_count(s.count - base.value);
    p.set_sum(scaled(s.sum - base.sum, c.spec.decimals));
    add_buckets(p, c, s, base);
    add_exemplars(p, c, s, base);
}

void add_exponential_histogram_point(pb::Metric& m,
                                     const point_context& c,
                                     const metrics::series& s,
                                     const baseline& base) {
    pb::ExponentialHistogram& h = *m.mutable_exponential_histogram();
    h.set_aggregation_temporality(c.temporality);
    pb::ExponentialHistogramDataPoint& p = *h.add_data_points();
    fill_attributes(p, c.spec, s);
    p.set_start_time_unix_nano(base.start_ns);
    p.set_time_unix_nano(c.now_ns);
    p.set_count(s.count - base.value);
    p.set_sum(scaled(s.sum - base.sum, c.spec.decimals));
    p.set_zero_threshold(metrics::native::zero_threshold);
    add_exponential_buckets(p, s, base);
    add_exemplars(p, c, s, base);
}

void add_summary_point(pb::Metric& m, const point_context& c, const metrics::series& s) {
    pb::SummaryDataPoint& p = *m.mutable_summary()->add_data_points();
    fill_attributes(p, c.spec, s);
    p.set_start_time_unix_nano(c.start_ns);
    p.set_time_unix_nano(c.now_ns);
    p.set_count(s.count);
    p.set_sum(scaled(s.sum, c.spec.decimals));
}

}  // namespace xtel::push::detail
