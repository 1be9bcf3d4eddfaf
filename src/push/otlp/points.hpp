#pragma once
/// The conversion of each kind of point, the metric store's series to OTLP's (private to
/// src/push/): a counter to a monotonic sum, a gauge to a gauge, a histogram to an explicit-bucket
/// histogram with its exemplars (an exponential one when it has native buckets), a summary to a
/// summary without quantiles.

#include <cstdint>
#include <span>
#include <vector>

#include "otlp_metrics.pb.h"
#include "push/otlp/temporality.hpp"
#include "xtel/metrics/snapshot.hpp"

namespace xtel::push::detail {

/// What the points of one family in one export share.
struct point_context {
    const metrics::family_spec& spec;
    std::uint64_t start_ns;  ///< the producer's start
    std::uint64_t now_ns;
    xtel::otlp::AggregationTemporality temporality;
    std::span<const double> bounds;  ///< a histogram's, as shown (see shown_bounds)
};

/// The metric of `spec` with no points yet: its name, description and unit.
void fill_metric(xtel::otlp::Metric& m, const metrics::family_spec& spec);

/// A histogram family's bounds as readers show them (divided by 10^decimals), into `out`.
void shown_bounds(const metrics::family_spec& spec, std::vector<double>& out);

void add_sum_point(xtel::otlp::Metric& m,
                   const point_context& c,
                   const metrics::series& s,
                   const baseline& base);
void add_gauge_point(xtel::otlp::Metric& m, const point_context& c, const metrics::series& s);
void add_histogram_point(xtel::otlp::Metric& m,
                         const point_context& c,
                         const metrics::series& s,
                         const baseline& base);
/// A histogram with native buckets (family_spec::native), as an exponential histogram whatever
/// classic bounds it keeps too: OTLP has one metric per name, of one type.
void add_exponential_histogram_point(xtel::otlp::Metric& m,
                                     const point_context& c,
                                     const metrics::series& s,
                                     const baseline& base);
void add_summary_point(xtel::otlp::Metric& m, const point_context& c, const metrics::series& s);

}  // namespace xtel::push::detail
