#include "push/otlp/json_writer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

#include "xtel/core/ascii.hpp"

namespace xtel::push::detail {

namespace {

namespace pb = xtel::otlp;

void json_string(std::string& out, std::string_view s) {
    out += '"';
    for (const char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    fmt::format_to(std::back_inserter(out), "\\u{:04x}",
                                   static_cast<unsigned>(static_cast<unsigned char>(c)));
                } else {
                    out += c;
                }
        }
    }
    out += '"';
}

void json_double(std::string& out, double d) {
    if (std::isnan(d)) {
        out += "\"NaN\"";
    } else if (std::isinf(d)) {
        out += d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    } else {
        fmt::format_to(std::back_inserter(out), "{}", d);
    }
}

void json_u64(std::string& out, std::uint64_t v) {
    fmt::format_to(std::back_inserter(out), "\"{}\"", v);
}

void json_i64(std::string& out, std::int64_t v) {
    fmt::format_to(std::back_inserter(out), "\"{}\"", v);
}

void json_hex(std::string& out, const std::string& bytes) {
    out += '"';
    out +=
        ascii::to_hex(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    out += '"';
}

/// Writes `"name":` after a comma unless first.
class fields {
  public:
    explicit fields(std::string& out) : out_(out) { out_ += '{'; }
    ~fields() { out_ += '}'; }
    fields(const fields&) = delete;
    fields& operator=(const fields&) = delete;

    std::string& key(std::string_view name) {
        if (!first_) {
            out_ += ',';
        }
        first_ = false;
        out_ += '"';
        out_ += name;
        out_ += "\":";
        return out_;
    }

  private:
    std::string& out_;
    bool first_ = true;
};

template <class Range, class Write>
void json_array(std::string& out, const Range& items, Write write) {
    out += '[';
    bool first = true;
    for (const auto& item : items) {
        if (!first) {
            out += ',';
        }
        first = false;
        write(out, item);
    }
    out += ']';
}

void json_any(std::string& out, const pb::AnyValue& v);

void json_key_value(std::string& out, const pb::KeyValue& kv) {
    fields f(out);
    json_string(f.key("key"), kv.key());
    json_any(f.key("value"), kv.value());
}

void json_attributes(fields& f,
                     std::string_view name,
                     const google::protobuf::RepeatedPtrField<pb::KeyValue>& kvs) {
    if (!kvs.empty()) {
        json_array(f.key(name), kvs, json_key_value);
    }
}

void json_any(std::string& out, const pb::AnyValue& v) {
    fields f(out);
    switch (v.value_case()) {
        case pb::AnyValue::kStringValue:
            json_string(f.key("stringValue"), v.string_value());
            break;
        case pb::AnyValue::kBoolValue:
            f.key("boolValue") += v.bool_value() ? "true" : "false";
            break;
        case pb::AnyValue::kIntValue:
            json_i64(f.key("intValue"), v.int_value());
            break;
        case pb::AnyValue::kDoubleValue:
            json_double(f.key("doubleValue"), v.double_value());
            break;
        default:
            // xtel makes no other kind of value.
            break;
    }
}

void json_exemplar(std::string& out, const pb::Exemplar& x) {
    fields f(out);
    json_attributes(f, "filteredAttributes", x.filtered_attributes());
    json_u64(f.key("timeUnixNano"), x.time_unix_nano());
    if (x.value_case() == pb::Exemplar::kAsInt) {
        json_i64(f.key("asInt"), x.as_int());
    } else {
        json_double(f.key("asDouble"), x.as_double());
    }
    if (!x.span_id().empty()) {
        json_hex(f.key("spanId"), x.span_id());
    }
    if (!x.trace_id().empty()) {
        json_hex(f.key("traceId"), x.trace_id());
    }
}

/// What every kind of point starts with: its attributes, its start (when set) and its time.
template <class Point>
void json_point_head(fields& f, const Point& p) {
    json_attributes(f, "attributes", p.attributes());
    if (p.start_time_unix_nano() != 0) {
        json_u64(f.key("startTimeUnixNano"), p.start_time_unix_nano());
    }
    json_u64(f.key("timeUnixNano"), p.time_unix_nano());
}

void json_number_point(std::string& out, const pb::NumberDataPoint& p) {
    fields f(out);
    json_point_head(f, p);
    if (p.value_case() == pb::NumberDataPoint::kAsInt) {
        json_i64(f.key("asInt"), p.as_int());
    } else {
        json_double(f.key("asDouble"), p.as_double());
    }
}

void json_histogram_point(std::string& out, const pb::HistogramDataPoint& p) {
    fields f(out);
    json_point_head(f, p);
    json_u64(f.key("count"), p.count());
    if (p.has_sum()) {
        json_double(f.key("sum"), p.sum());
    }
    json_array(f.key("bucketCounts"), p.bucket_counts(), json_u64);
    json_array(f.key("explicitBounds"), p.explicit_bounds(), json_double);
    if (!p.exemplars().empty()) {
        json_array(f.key("exemplars"), p.exemplars(), json_exemplar);
    }
}

void json_exponential_point(std::string& out, const pb::ExponentialHistogramDataPoint& p) {
    fields f(out);
    json_point_head(f, p);
    json_u64(f.key("count"), p.count());
    if (p.has_sum()) {
        json_double(f.key("sum"), p.sum());
    }
    // sint32 is a JSON number, fixed64 and uint64 strings.
    fmt::format_to(std::back_inserter(f.key("scale")), "{}", p.scale());
    json_u64(f.key("zeroCount"), p.zero_count());
    if (p.has_positive()) {
        fields b(f.key("positive"));
        fmt::format_to(std::back_inserter(b.key("offset")), "{}", p.positive().offset());
        json_array(b.key("bucketCounts"), p.positive().bucket_counts(), json_u64);
    }
    if (!p.exemplars().empty()) {
        json_array(f.key("exemplars"), p.exemplars(), json_exemplar);
    }
    json_double(f.key("zeroThreshold"), p.zero_threshold());
}

void json_summary_point(std::string& out, const pb::SummaryDataPoint& p) {
    fields f(out);
    json_point_head(f, p);
    json_u64(f.key("count"), p.count());
    json_double(f.key("sum"), p.sum());
}

void json_metric(std::string& out, const pb::Metric& m) {
    fields f(out);
    json_string(f.key("name"), m.name());
    if (!m.description().empty()) {
        json_string(f.key("description"), m.description());
    }
    if (!m.unit().empty()) {
        json_string(f.key("unit"), m.unit());
    }
    switch (m.data_case()) {
        case pb::Metric::kGauge: {
            fields g(f.key("gauge"));
            json_array(g.key("dataPoints"), m.gauge().data_points(), json_number_point);
            break;
        }
        case pb::Metric::kSum: {
            fields s(f.key("sum"));
            json_array(s.key("dataPoints"), m.sum().data_points(), json_number_point);
            fmt::format_to(std::back_inserter(s.key("aggregationTemporality")), "{}",
                           static_cast<int>(m.sum().aggregation_temporality()));
            if (m.sum().is_monotonic()) {
                s.key("isMonotonic") += "true";
            }
            break;
        }
        case pb::Metric::kHistogram: {
            fields h(f.key("histogram"));
            json_array(h.key("dataPoints"), m.histogram().data_points(), json_histogram_point);
            fmt::format_to(std::back_inserter(h.key("aggregationTemporality")), "{}",
                           static_cast<int>(m.histogram().aggregation_temporality()));
            break;
        }
        case pb::Metric::kExponentialHistogram: {
            fields h(f.key("exponentialHistogram"));
            json_array(h.key("dataPoints"), m.exponential_histogram().data_points(),
                       json_exponential_point);
            fmt::format_to(std::back_inserter(h.key("aggregationTemporality")), "{}",
                           static_cast<int>(m.exponential_histogram().aggregation_temporality()));
            break;
        }
        case pb::Metric::kSummary: {
            fields s(f.key("summary"));
            json_array(s.key("dataPoints"), m.summary().data_points(), json_summary_point);
            break;
        }
        default:
            break;
    }
}

void json_request(std::string& out, const pb::ExportMetricsServiceRequest& r) {
    fields top(out);
    json_array(top.key("resourceMetrics"), r.resource_metrics(),
               [](std::string& o, const pb::ResourceMetrics& rm) {
                   fields f(o);
                   {
                       fields res(f.key("resource"));
                       json_attributes(res, "attributes", rm.resource().attributes());
                   }
                   json_array(f.key("scopeMetrics"), rm.scope_metrics(),
                              [](std::string& o2, const pb::ScopeMetrics& sm) {
                                  fields s(o2);
                                  {
                                      fields scope(s.key("scope"));
                                      json_string(scope.key("name"), sm.scope().name());
                                      json_string(scope.key("version"), sm.scope().version());
                                  }
                                  json_array(s.key("metrics"), sm.metrics(), json_metric);
                              });
               });
}

void json_event(std::string& out, const pb::Span::Event& e) {
    fields f(out);
    json_u64(f.key("timeUnixNano"), e.time_unix_nano());
    json_string(f.key("name"), e.name());
    json_attributes(f, "attributes", e.attributes());
}

void json_span(std::string& out, const pb::Span& s) {
    fields f(out);
    json_hex(f.key("traceId"), s.trace_id());
    json_hex(f.key("spanId"), s.span_id());
    if (!s.parent_span_id().empty()) {
        json_hex(f.key("parentSpanId"), s.parent_span_id());
    }
    // fixed32 is a JSON number; only 64-bit integers are strings.
    fmt::format_to(std::back_inserter(f.key("flags")), "{}", s.flags());
    json_string(f.key("name"), s.name());
    fmt::format_to(std::back_inserter(f.key("kind")), "{}", static_cast<int>(s.kind()));
    json_u64(f.key("startTimeUnixNano"), s.start_time_unix_nano());
    json_u64(f.key("endTimeUnixNano"), s.end_time_unix_nano());
    json_attributes(f, "attributes", s.attributes());
    if (!s.events().empty()) {
        json_array(f.key("events"), s.events(), json_event);
    }
    if (s.has_status()) {
        fields st(f.key("status"));
        if (!s.status().message().empty()) {
            json_string(st.key("message"), s.status().message());
        }
        fmt::format_to(std::back_inserter(st.key("code")), "{}",
                       static_cast<int>(s.status().code()));
    }
}

void json_request(std::string& out, const pb::ExportTraceServiceRequest& r) {
    fields top(out);
    json_array(top.key("resourceSpans"), r.resource_spans(),
               [](std::string& o, const pb::ResourceSpans& rs) {
                   fields f(o);
                   {
                       fields res(f.key("resource"));
                       json_attributes(res, "attributes", rs.resource().attributes());
                   }
                   json_array(f.key("scopeSpans"), rs.scope_spans(),
                              [](std::string& o2, const pb::ScopeSpans& ss) {
                                  fields s(o2);
                                  {
                                      fields scope(s.key("scope"));
                                      json_string(scope.key("name"), ss.scope().name());
                                      json_string(scope.key("version"), ss.scope().version());
                                  }
                                  json_array(s.key("spans"), ss.spans(), json_span);
                              });
               });
}

}  // namespace

std::string to_json(const pb::ExportTraceServiceRequest& request) {
    std::string out;
    json_request(out, request);
    return out;
}

std::string to_json(const pb::ExportMetricsServiceRequest& request) {
    std::string out;
    json_request(out, request);
    return out;
}

}  // namespace xtel::push::detail
