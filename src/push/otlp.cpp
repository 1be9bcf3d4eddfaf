#include "xtel/push/otlp.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "core/log.hpp"
#include "otlp_metrics.pb.h"
#include "push/scaled.hpp"
#include "xtel/core/version.hpp"
#include "xtel/http/gzip.hpp"
#include "xtel/metrics/exposition.hpp"

namespace xtel::push {

namespace {

using metrics::metric_type;
namespace pb = xtel::otlp;

/// What the pusher's gzip costs: level 1, as the scrapes' (the body is sent once).
constexpr int gzip_level = 1;

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

void put(google::protobuf::RepeatedPtrField<pb::KeyValue>& out,
         std::string_view key,
         std::string_view value) {
    pb::KeyValue& kv = *out.Add();
    kv.set_key(std::string(key));
    kv.mutable_value()->set_string_value(metrics::to_valid_utf8(value));
}

void put(google::protobuf::RepeatedPtrField<pb::KeyValue>& out,
         std::string_view key,
         std::int64_t value) {
    pb::KeyValue& kv = *out.Add();
    kv.set_key(std::string(key));
    kv.mutable_value()->set_int_value(value);
}

/// `s` as a non-negative integer that fits int64, or nullopt.
std::optional<std::int64_t> as_int(std::string_view s) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
        return std::nullopt;
    }
    return v;
}

/// `n` bytes of hex digits from `s` (2n characters), or empty when `s` is not that or is all
/// zeros (an invalid id in W3C Trace Context).
std::string hex_id(std::string_view s, std::size_t n) {
    if (s.size() != 2 * n) {
        return {};
    }
    std::string out(n, '\0');
    bool nonzero = false;
    for (std::size_t i = 0; i < n; ++i) {
        unsigned v = 0;
        const auto [end, ec] = std::from_chars(s.data() + 2 * i, s.data() + 2 * i + 2, v, 16);
        if (ec != std::errc() || end != s.data() + 2 * i + 2) {
            return {};
        }
        out[i] = static_cast<char>(v);
        nonzero = nonzero || v != 0;
    }
    return nonzero ? out : std::string();
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

void add_exemplar(pb::HistogramDataPoint& p, const metrics::exemplar& e, std::uint8_t decimals) {
    pb::Exemplar& x = *p.add_exemplars();
    x.set_time_unix_nano(e.timestamp_us * 1000);
    set_value(x, e.value, decimals);
    // A trace id (32 hex digits) or a W3C traceparent (version-traceid-spanid-flags) becomes
    // the exemplar's trace (and span); any other id stays an attribute under its label name.
    const std::string_view v = e.label_value;
    if (auto trace = hex_id(v, 16); !trace.empty()) {
        x.set_trace_id(std::move(trace));
        return;
    }
    if (v.size() == 55 && v[2] == '-' && v[35] == '-' && v[52] == '-') {
        auto trace = hex_id(v.substr(3, 32), 16);
        auto span = hex_id(v.substr(36, 16), 8);
        if (!trace.empty() && !span.empty()) {
            x.set_trace_id(std::move(trace));
            x.set_span_id(std::move(span));
            return;
        }
    }
    put(*x.mutable_filtered_attributes(), e.label_name, e.label_value);
}

// ---- JSON, by OTLP's rules: the proto3 JSON mapping with lowerCamelCase names, 64-bit integers
// as decimal strings, enums as numbers, trace and span ids as hex. Fields at their default are
// left out, as the mapping allows; a oneof's value is always written.

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
    for (const char c : bytes) {
        fmt::format_to(std::back_inserter(out), "{:02x}",
                       static_cast<unsigned>(static_cast<unsigned char>(c)));
    }
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

}  // namespace

// ---- the encoder

/// A counter's or histogram's values at the previous encode, for delta temporality.
struct previous {
    std::uint64_t start_ns = 0;  ///< the producer's start: another one means a restart
    std::uint64_t time_ns = 0;   ///< of the encode that sent them
    std::uint64_t value = 0;     ///< counter; histogram: count
    std::uint64_t sum = 0;
    std::vector<std::uint64_t> buckets;
    std::uint64_t seen = 0;  ///< the encode that last saw the series
};

struct otlp_encoder::state {
    std::unordered_map<std::string, previous> series;
    std::uint64_t encodes = 0;
    std::string key;  ///< scratch
};

otlp_encoder::otlp_encoder(otlp_resource resource, otlp_temporality temporality)
    : resource_(std::move(resource)),
      temporality_(temporality),
      state_(std::make_unique<state>()) {}

otlp_encoder::~otlp_encoder() = default;

std::size_t otlp_encoder::tracked_series() const noexcept {
    return state_->series.size();
}

namespace {

/// The resource of one agent's snapshot, or of the exporter's own (`own`).
void fill_resource(pb::Resource& r, const otlp_resource& common, const metrics::snapshot* agent) {
    auto& attrs = *r.mutable_attributes();
    std::vector<metrics::label> facts;
    std::string service = agent != nullptr ? common.service_name : "xtel-exporter";
    std::string instance;
    if (agent != nullptr) {
        for (const metrics::label& l : agent->labels) {
            if (l.name == "agent_name") {
                instance = common.host_name + ":" + l.value;
            }
        }
    } else {
        instance = common.host_name + ":xtel-exporter";
    }
    put(attrs, "service.name", service);
    put(attrs, "service.instance.id", instance);
    put(attrs, "host.name", common.host_name);
    for (const metrics::label& l : common.attributes) {
        if (l.name != "service.name" && l.name != "service.instance.id" && l.name != "host.name" &&
            l.name != "process.pid") {
            put(attrs, l.name, l.value);
        }
    }
    if (agent == nullptr) {
        put(attrs, "process.pid", static_cast<std::int64_t>(::getpid()));
        return;
    }
    for (const metrics::label& l : agent->labels) {
        if (l.name == "pid") {
            if (const auto v = as_int(l.value)) {
                put(attrs, "process.pid", *v);
                continue;
            }
        } else if (l.name == "agent_name") {
            put(attrs, "xtel.agent.name", l.value);
            continue;
        } else if (l.name == "rank" || l.name == "local_rank") {
            if (const auto v = as_int(l.value)) {
                put(attrs, "xtel." + l.name, *v);
                continue;
            }
        }
        put(attrs, l.name, l.value);
    }
}

}  // namespace

std::string otlp_encoder::encode(
    std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
    std::uint64_t now_ns,
    otlp_encoding encoding) {
    pb::ExportMetricsServiceRequest request;
    state& st = *state_;
    const std::uint64_t encode_number = ++st.encodes;
    const bool delta = temporality_ == otlp_temporality::delta;
    const auto temporality =
        delta ? pb::AGGREGATION_TEMPORALITY_DELTA : pb::AGGREGATION_TEMPORALITY_CUMULATIVE;

    // The exporter's own snapshots (no labels) share one resource, made at the first of them.
    pb::ScopeMetrics* own = nullptr;
    for (const auto& snap_ptr : snapshots) {
        const metrics::snapshot& snap = *snap_ptr;
        const bool is_agent = !snap.labels.empty();
        pb::ScopeMetrics* scope = nullptr;
        if (is_agent || own == nullptr) {
            pb::ResourceMetrics& rm = *request.add_resource_metrics();
            fill_resource(*rm.mutable_resource(), resource_, is_agent ? &snap : nullptr);
            scope = rm.add_scope_metrics();
            scope->mutable_scope()->set_name("xtel");
            scope->mutable_scope()->set_version(std::string(version()));
            if (!is_agent) {
                own = scope;
            }
        } else {
            scope = own;
        }
        const std::uint64_t start_ns = snap.start_time_us * 1000;
        // The series key: the resource (its labels), the family, the series' label values.
        std::string resource_key;
        for (const metrics::label& l : snap.labels) {
            resource_key += l.value;
            resource_key += '\x1f';
        }
        for (const metrics::family_snapshot& f : snap.families) {
            const metrics::family_spec& spec = f.spec;
            pb::Metric& m = *scope->add_metrics();
            // The name a scrape shows, `_total` included: OpenTelemetry's naming would drop it from
            // a counter, but NIXL's families have a gauge and a counter that differ only by it
            // (agent_xfer_post_time and agent_xfer_post_time_total), and an OTLP to Prometheus
            // translation adds it only where it is missing.
            m.set_name(spec.name);
            m.set_description(metrics::to_valid_utf8(spec.help));
            m.set_unit(ucum(spec.unit));
            std::vector<double> bounds;
            if (spec.type == metric_type::histogram) {
                for (const double b : spec.bounds) {
                    const std::string text = metrics::format_bound(b, spec.decimals);
                    double v = 0;
                    std::from_chars(text.data(), text.data() + text.size(), v);
                    bounds.push_back(v);
                }
            }
            for (const metrics::series& s : f.series) {
                // This series' previous values, for delta: found (or made) by its key.
                previous* prev = nullptr;
                bool restarted = true;
                if (delta &&
                    (spec.type == metric_type::counter || spec.type == metric_type::histogram)) {
                    st.key = resource_key;
                    st.key += spec.name;
                    for (const std::string& v : s.label_values) {
                        st.key += '\x1f';
                        st.key += v;
                    }
                    auto [at, added] = st.series.try_emplace(st.key);
                    prev = &at->second;
                    const std::uint64_t now_value =
                        spec.type == metric_type::counter ? s.value : s.count;
                    restarted = added || prev->start_ns != start_ns || now_value < prev->value ||
                                (spec.type == metric_type::histogram &&
                                 (s.sum < prev->sum || prev->buckets.size() != s.buckets.size()));
                    if (!restarted && spec.type == metric_type::histogram) {
                        for (std::size_t i = 0; i < s.buckets.size(); ++i) {
                            restarted = restarted || s.buckets[i] < prev->buckets[i];
                        }
                    }
                }
                const std::uint64_t point_start =
                    prev != nullptr && !restarted ? prev->time_ns : start_ns;
                const auto fill_attributes = [&](auto& point) {
                    const auto& names = spec.label_names;
                    for (std::size_t i = 0; i < names.size() && i < s.label_values.size(); ++i) {
                        put(*point.mutable_attributes(), names[i], s.label_values[i]);
                    }
                };
                switch (spec.type) {
                    case metric_type::counter: {
                        pb::Sum& sum = *m.mutable_sum();
                        sum.set_aggregation_temporality(temporality);
                        sum.set_is_monotonic(true);
                        pb::NumberDataPoint& p = *sum.add_data_points();
                        fill_attributes(p);
                        p.set_start_time_unix_nano(point_start);
                        p.set_time_unix_nano(now_ns);
                        const std::uint64_t base = prev != nullptr && !restarted ? prev->value : 0;
                        set_value(p, s.value - base, spec.decimals);
                        break;
                    }
                    case metric_type::gauge: {
                        pb::NumberDataPoint& p = *m.mutable_gauge()->add_data_points();
                        fill_attributes(p);
                        p.set_time_unix_nano(now_ns);
                        set_value(p, s.value, spec.decimals);
                        break;
                    }
                    case metric_type::histogram: {
                        pb::Histogram& h = *m.mutable_histogram();
                        h.set_aggregation_temporality(temporality);
                        pb::HistogramDataPoint& p = *h.add_data_points();
                        fill_attributes(p);
                        p.set_start_time_unix_nano(point_start);
                        p.set_time_unix_nano(now_ns);
                        const bool diff = prev != nullptr && !restarted;
                        p.set_count(s.count - (diff ? prev->value : 0));
                        p.set_sum(scaled(s.sum - (diff ? prev->sum : 0), spec.decimals));
                        std::uint64_t below_inf = 0;
                        for (std::size_t i = 0; i < bounds.size(); ++i) {
                            const std::uint64_t b = i < s.buckets.size() ? s.buckets[i] : 0;
                            const std::uint64_t was = diff ? prev->buckets[i] : 0;
                            p.add_bucket_counts(b - was);
                            below_inf += b - was;
                        }
                        p.add_bucket_counts(p.count() - std::min(p.count(), below_inf));
                        for (const double b : bounds) {
                            p.add_explicit_bounds(b);
                        }
                        // Delta: only the exemplars of observations since the previous export.
                        const std::uint64_t since_ns = diff ? prev->time_ns : 0;
                        for (const metrics::exemplar& e : s.exemplars) {
                            if (!e.label_value.empty() && e.timestamp_us * 1000 > since_ns) {
                                add_exemplar(p, e, spec.decimals);
                            }
                        }
                        break;
                    }
                    case metric_type::summary: {
                        pb::SummaryDataPoint& p = *m.mutable_summary()->add_data_points();
                        fill_attributes(p);
                        p.set_start_time_unix_nano(start_ns);
                        p.set_time_unix_nano(now_ns);
                        p.set_count(s.count);
                        p.set_sum(scaled(s.sum, spec.decimals));
                        break;
                    }
                }
                if (prev != nullptr) {
                    prev->start_ns = start_ns;
                    prev->time_ns = now_ns;
                    prev->value = spec.type == metric_type::counter ? s.value : s.count;
                    prev->sum = s.sum;
                    prev->buckets = s.buckets;
                    prev->seen = encode_number;
                }
            }
        }
    }
    // Series no longer served (their agent went) are forgotten: if one comes back, its next
    // point starts afresh from its producer's start.
    if (delta) {
        std::erase_if(st.series, [&](const auto& kv) { return kv.second.seen != encode_number; });
    }
    if (encoding == otlp_encoding::protobuf) {
        return request.SerializeAsString();
    }
    std::string out;
    json_request(out, request);
    return out;
}

// ---- the answer

namespace {

/// The most of a receiver's error message that is kept.
constexpr std::size_t max_message = 512;

/// The value after `"key":` in a JSON text, as written by a receiver: a number or a string
/// (the first 512 bytes, escapes kept as written); nullopt when the key is not there.
std::optional<std::string> json_field(std::string_view body, std::string_view key) {
    const std::string quoted = fmt::format("\"{}\"", key);
    const std::size_t at = body.find(quoted);
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    std::size_t i = at + quoted.size();
    const auto skip_space = [&] {
        while (i < body.size() &&
               (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r')) {
            ++i;
        }
    };
    skip_space();
    if (i >= body.size() || body[i] != ':') {
        return std::nullopt;
    }
    ++i;
    skip_space();
    if (i >= body.size()) {
        return std::nullopt;
    }
    if (body[i] == '"') {
        std::string out;
        for (++i; i < body.size() && body[i] != '"' && out.size() < max_message; ++i) {
            if (body[i] == '\\' && i + 1 < body.size()) {
                out += body[i++];
            }
            out += body[i];
        }
        return out;
    }
    std::size_t end = i;
    while (end < body.size() && end - i < 32 &&
           (std::isdigit(static_cast<unsigned char>(body[end])) != 0 || body[end] == '-')) {
        ++end;
    }
    return std::string(body.substr(i, end - i));
}

}  // namespace

std::optional<otlp_partial_success> parse_otlp_response(std::string_view body,
                                                        std::string_view content_type) {
    otlp_partial_success out;
    if (content_type.starts_with("application/json")) {
        if (body.find("\"partialSuccess\"") == std::string_view::npos) {
            return std::nullopt;
        }
        if (const auto n = json_field(body, "rejectedDataPoints")) {
            std::from_chars(n->data(), n->data() + n->size(), out.rejected_data_points);
        }
        if (auto m = json_field(body, "errorMessage")) {
            out.error_message = std::move(*m);
        }
    } else {
        pb::ExportMetricsServiceResponse r;
        if (body.empty() || !r.ParseFromArray(body.data(), static_cast<int>(body.size())) ||
            !r.has_partial_success()) {
            return std::nullopt;
        }
        out.rejected_data_points = r.partial_success().rejected_data_points();
        out.error_message = r.partial_success().error_message();
    }
    if (out.rejected_data_points == 0 && out.error_message.empty()) {
        return std::nullopt;
    }
    // The receiver's words go into a log line: cut short, and no control characters that
    // could forge another line or move a terminal's cursor.
    if (out.error_message.size() > max_message) {
        out.error_message.resize(max_message);
    }
    for (char& c : out.error_message) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            c = '?';
        }
    }
    return out;
}

// ---- the exporter

otlp_pusher::otlp_pusher(otlp_options o)
    : options_(std::move(o)),
      encoder_(options_.resource, options_.temporality),
      rejected_points_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    push_options p;
    p.what = "OTLP";
    p.headers.push_back(options_.encoding == otlp_encoding::protobuf
                            ? "Content-Type: application/x-protobuf"
                            : "Content-Type: application/json");
    if (options_.gzip) {
        p.headers.push_back("Content-Encoding: gzip");
    }
    for (const auto& [name, value] : options_.headers) {
        p.headers.push_back(name + ": " + value);
    }
    p.queue_capacity = options_.queue_capacity;
    p.timeout = options_.timeout;
    // The OTLP/HTTP specification's retryable answers.
    p.retryable = [](long status) {
        return status == 429 || status == 502 || status == 503 || status == 504;
    };
    p.on_success = [rejected = rejected_points_, url = options_.url](std::string_view body,
                                                                     std::string_view type) {
        if (const auto partial = parse_otlp_response(body, type)) {
            rejected->fetch_add(static_cast<std::uint64_t>(
                                    std::max<std::int64_t>(0, partial->rejected_data_points)),
                                std::memory_order_relaxed);
            detail::log(log_level::warning, "OTLP to {}: the receiver rejected {} points ({})", url,
                        partial->rejected_data_points, partial->error_message);
        }
    };
    sender_ = std::make_unique<http_pusher>(options_.url, std::move(p));
}

void otlp_pusher::push(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
                       std::uint64_t now_ns) {
    std::string body = encoder_.encode(snapshots, now_ns, options_.encoding);
    if (options_.gzip) {
        body = http::gzip(body, gzip_level);
    }
    sender_->push(std::move(body));
}

}  // namespace xtel::push
