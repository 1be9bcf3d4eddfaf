#include <string>
#include <utility>
#include <vector>

#include "otlp_metrics.pb.h"
#include "push/otlp/attributes.hpp"
#include "push/otlp/json_writer.hpp"
#include "push/otlp/points.hpp"
#include "push/otlp/temporality.hpp"
#include "xtel/core/version.hpp"
#include "xtel/push/otlp.hpp"

namespace xtel::push {

namespace pb = xtel::otlp;
using metrics::metric_type;

namespace {

/// What one encode reuses from the last, not to allocate again.
struct scratch {
    std::string resource_key;    ///< the current snapshot's label values
    std::vector<double> bounds;  ///< the current family's, as shown
};

}  // namespace

struct otlp_encoder::state {
    otlp_resource resource;
    std::unique_ptr<detail::temporality_selector> selector;
    scratch reused;
};

otlp_encoder::otlp_encoder(otlp_resource resource, otlp_temporality temporality)
    : state_(std::make_unique<state>(
          state{std::move(resource), detail::make_temporality_selector(temporality), {}})) {}

otlp_encoder::~otlp_encoder() = default;

std::size_t otlp_encoder::tracked_series() const noexcept {
    return state_->selector->tracked_series();
}

namespace {

/// A new resource with xtel's scope, for one agent's snapshot or xtel-exporter's own (nullptr).
pb::ScopeMetrics* add_scope(pb::ExportMetricsServiceRequest& request,
                            const otlp_resource& resource,
                            const metrics::snapshot* agent) {
    pb::ResourceMetrics& rm = *request.add_resource_metrics();
    detail::fill_resource(*rm.mutable_resource(), resource, agent);
    pb::ScopeMetrics* scope = rm.add_scope_metrics();
    scope->mutable_scope()->set_name("xtel");
    scope->mutable_scope()->set_version(std::string(version()));
    return scope;
}

/// One family's metric, its points from its series.
void add_family(pb::ScopeMetrics& scope,
                const metrics::family_snapshot& f,
                std::uint64_t start_ns,
                std::uint64_t now_ns,
                detail::temporality_selector& selector,
                scratch& reused) {
    const metrics::family_spec& spec = f.spec;
    pb::Metric& m = *scope.add_metrics();
    detail::fill_metric(m, spec);
    detail::shown_bounds(spec, reused.bounds);
    const detail::point_context c{spec, start_ns, now_ns, selector.temporality(), reused.bounds};
    for (const metrics::series& s : f.series) {
        const detail::series_id id{reused.resource_key, spec.name, s.label_values};
        switch (spec.type) {
            case metric_type::counter:
                detail::add_sum_point(
                    m, c, s,
                    selector.advance(
                        id, {.start_ns = start_ns, .value = s.value, .sum = 0, .buckets = {}},
                        now_ns));
                break;
            case metric_type::gauge:
                detail::add_gauge_point(m, c, s);
                break;
            case metric_type::histogram:
                if (spec.native) {
                    detail::add_exponential_histogram_point(
                        m, c, s,
                        selector.advance(id,
                                         {.start_ns = start_ns,
                                          .value = s.count,
                                          .sum = s.sum,
                                          .buckets = {},
                                          .native = {.schema = s.native_schema,
                                                     .first = s.native_first,
                                                     .buckets = s.native_buckets,
                                                     .zero_count = s.zero_count}},
                                         now_ns));
                    break;
                }
                detail::add_histogram_point(m, c, s,
                                            selector.advance(id,
                                                             {.start_ns = start_ns,
                                                              .value = s.count,
                                                              .sum = s.sum,
                                                              .buckets = s.buckets},
                                                             now_ns));
                break;
            case metric_type::summary:
                detail::add_summary_point(m, c, s);
                break;
        }
    }
}

}  // namespace

std::string otlp_encoder::encode(
    std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
    std::uint64_t now_ns,
    otlp_encoding encoding) {
    pb::ExportMetricsServiceRequest request;
    state& st = *state_;
    // xtel-exporter's own snapshots (no labels) share one resource, made at the first of them.
    pb::ScopeMetrics* own = nullptr;
    for (const auto& snap_ptr : snapshots) {
        const metrics::snapshot& snap = *snap_ptr;
        const bool is_agent = !snap.labels.empty();
        pb::ScopeMetrics* scope = is_agent ? add_scope(request, st.resource, &snap) : own;
        if (scope == nullptr) {
            scope = own = add_scope(request, st.resource, nullptr);
        }
        // The series' key starts with its resource's label values.
        st.reused.resource_key.clear();
        for (const metrics::label& l : snap.labels) {
            st.reused.resource_key += l.value;
            st.reused.resource_key += '\x1f';
        }
        for (const metrics::family_snapshot& f : snap.families) {
            add_family(*scope, f, snap.start_time_us * 1000, now_ns, *st.selector, st.reused);
        }
    }
    st.selector->end_export();
    if (encoding == otlp_encoding::protobuf) {
        return request.SerializeAsString();
    }
    return detail::to_json(request);
}

}  // namespace xtel::push
