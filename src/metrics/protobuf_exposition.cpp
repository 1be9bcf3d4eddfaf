#include "metrics/protobuf_exposition.hpp"

#include <bit>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "metrics/exposition_walk.hpp"
#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/native_histogram.hpp"

namespace xtel::metrics::detail {

namespace {

/// Field numbers of io.prometheus.client's messages (client_model's metrics.proto; our
/// proto/prometheus_metrics.proto lists the same).
namespace field {
// MetricFamily
constexpr std::uint32_t family_name = 1, family_help = 2, family_type = 3, family_metric = 4,
                        family_unit = 5;
// Metric
constexpr std::uint32_t metric_label = 1, metric_gauge = 2, metric_counter = 3, metric_summary = 4,
                        metric_histogram = 7;
// LabelPair
constexpr std::uint32_t label_name = 1, label_value = 2;
// Gauge, Counter
constexpr std::uint32_t value = 1, counter_created = 3;
// Summary
constexpr std::uint32_t summary_count = 1, summary_sum = 2, summary_created = 4;
// Histogram
constexpr std::uint32_t histogram_count = 1, histogram_sum = 2, histogram_bucket = 3,
                        histogram_schema = 5, histogram_zero_threshold = 6,
                        histogram_zero_count = 7, histogram_positive_span = 12,
                        histogram_positive_delta = 13, histogram_created = 15,
                        histogram_exemplars = 16;
// Bucket
constexpr std::uint32_t bucket_cumulative_count = 1, bucket_upper_bound = 2, bucket_exemplar = 3;
// BucketSpan
constexpr std::uint32_t span_offset = 1, span_length = 2;
// Exemplar
constexpr std::uint32_t exemplar_label = 1, exemplar_value = 2, exemplar_timestamp = 3;
// google.protobuf.Timestamp
constexpr std::uint32_t timestamp_seconds = 1, timestamp_nanos = 2;
}  // namespace field

/// MetricType's values.
constexpr std::uint64_t type_code(metric_type t) noexcept {
    switch (t) {
        case metric_type::counter:
            return 0;
        case metric_type::gauge:
            return 1;
        case metric_type::summary:
            return 2;
        case metric_type::histogram:
            return 4;
    }
    return 3;  // UNTYPED
}

constexpr std::uint32_t varint_wire = 0, fixed64_wire = 1, length_wire = 2;

constexpr std::size_t varint_size(std::uint64_t v) noexcept {
    std::size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

constexpr std::uint64_t zigzag(std::int64_t v) noexcept {
    return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}

constexpr std::size_t tag_size(std::uint32_t f) noexcept {
    return varint_size(std::uint64_t{f} << 3);
}

/// The first pass: the length of every message, in the order the messages start (a message's
/// before those nested in it), which is the order the second pass writes their lengths in.
/// Together the two passes write each byte once, into a body sized exactly.
class size_pass {
  public:
    explicit size_pass(std::vector<std::uint32_t>& sizes) : sizes_(sizes) {}

    void uint(std::uint32_t f, std::uint64_t v) {
        if (v != 0) {
            total_ += tag_size(f) + varint_size(v);
        }
    }
    void sint(std::uint32_t f, std::int64_t v) { uint(f, zigzag(v)); }
    void real(std::uint32_t f, double v) {
        if (std::bit_cast<std::uint64_t>(v) != 0) {  // proto3 writes -0.0, not 0.0
            total_ += tag_size(f) + 8;
        }
    }
    void string(std::uint32_t f, std::string_view s) {
        if (!s.empty()) {
            total_ += tag_size(f) + varint_size(s.size()) + s.size();
        }
    }
    /// An element of a packed repeated field, between open() and close().
    void element(std::uint64_t v) { total_ += varint_size(v); }
    /// A message (or packed field) of field `f` starts; 0: a delimited top-level message.
    void open(std::uint32_t f) {
        open_.push_back({sizes_.size(), total_, f});
        sizes_.push_back(0);
    }
    void close() {
        const opened o = open_.back();
        open_.pop_back();
        const std::size_t body = total_ - o.start;
        sizes_[o.slot] = static_cast<std::uint32_t>(body);
        total_ += (o.field == 0 ? 0 : tag_size(o.field)) + varint_size(body);
    }
    std::size_t total() const noexcept { return total_; }

  private:
    struct opened {
        std::size_t slot;
        std::size_t start;
        std::uint32_t field;
    };
    std::vector<std::uint32_t>& sizes_;
    std::vector<opened> open_;
    std::size_t total_ = 0;
};

/// The second pass: writes what size_pass measured, taking each message's length from it.
class write_pass {
  public:
    write_pass(char* at, const std::vector<std::uint32_t>& sizes) : at_(at), sizes_(sizes) {}

    void uint(std::uint32_t f, std::uint64_t v) {
        if (v != 0) {
            tag(f, varint_wire);
            put(v);
        }
    }
    void sint(std::uint32_t f, std::int64_t v) { uint(f, zigzag(v)); }
    void real(std::uint32_t f, double v) {
        auto bits = std::bit_cast<std::uint64_t>(v);
        if (bits == 0) {
            return;
        }
        tag(f, fixed64_wire);
        for (int i = 0; i < 8; ++i) {  // little-endian, whatever the host
            *at_++ = static_cast<char>(bits & 0xFF);
            bits >>= 8;
        }
    }
    void string(std::uint32_t f, std::string_view s) {
        if (!s.empty()) {
            tag(f, length_wire);
            put(s.size());
            std::memcpy(at_, s.data(), s.size());
            at_ += s.size();
        }
    }
    void element(std::uint64_t v) { put(v); }
    void open(std::uint32_t f) {
        if (f != 0) {
            tag(f, length_wire);
        }
        put(sizes_[next_++]);
    }
    void close() {}
    char* end() const noexcept { return at_; }

  private:
    void tag(std::uint32_t f, std::uint32_t wire) { put((std::uint64_t{f} << 3) | wire); }
    void put(std::uint64_t v) {
        while (v >= 0x80) {
            *at_++ = static_cast<char>(v | 0x80);
            v >>= 7;
        }
        *at_++ = static_cast<char>(v);
    }

    char* at_;
    const std::vector<std::uint32_t>& sizes_;
    std::size_t next_ = 0;
};

/// What both passes compute alike, kept between series.
struct scratch {
    std::string text;  // a string made valid UTF-8
    std::vector<native::bucket_span> spans;
    std::vector<std::int64_t> deltas;
    std::vector<double> upper;  // the bounds shown, of `upper_of`
    const family_spec* upper_of = nullptr;
};

/// `v` if it is valid UTF-8 (proto3 strings must be, and Prometheus refuses a scrape over an
/// invalid HELP), else `v` with each invalid byte replaced by U+FFFD in `into`, as the text
/// formats show it.
std::string_view valid_utf8(std::string_view v, std::string& into) {
    if (is_utf8(v)) {
        return v;
    }
    into = to_valid_utf8(v);
    return into;
}

double scaled(std::uint64_t v, std::uint8_t decimals) noexcept {
    // Both exact below 2^53 and 10^22: the quotient is the double nearest the decimal the text
    // formats show, which is what Prometheus parses from them.
    return shown_bound(static_cast<double>(v), decimals);
}

template <class Pass>
void put_label(Pass& p, std::uint32_t f, std::string_view name, std::string_view value) {
    p.open(f);
    p.string(field::label_name, name);
    p.string(field::label_value, value);
    p.close();
}

template <class Pass>
void put_timestamp(Pass& p, std::uint32_t f, std::uint64_t us) {
    if (us == 0) {
        return;
    }
    p.open(f);
    p.uint(field::timestamp_seconds, us / 1'000'000);
    p.uint(field::timestamp_nanos, us % 1'000'000 * 1'000);
    p.close();
}

/// Bucket `i`'s exemplar of `s` as field `f`, when it has one to show.
template <class Pass>
void put_exemplar(
    Pass& p, std::uint32_t f, const series& s, std::size_t i, std::uint8_t decimals, scratch& sc) {
    if (i >= s.exemplars.size()) {
        return;
    }
    const exemplar& e = s.exemplars[i];
    const exemplar_labels shown = labels_of(e);
    if (!shown.shown) {
        return;
    }
    p.open(f);
    if (shown.trace) {
        const auto trace = to_hex(e.trace_id);
        put_label(p, field::exemplar_label, "trace_id", {trace.data(), trace.size()});
        if (shown.span) {
            const auto span = to_hex(e.span_id);
            put_label(p, field::exemplar_label, "span_id", {span.data(), span.size()});
        }
    }
    if (shown.own) {
        put_label(p, field::exemplar_label, e.label_name, valid_utf8(e.label_value, sc.text));
    }
    p.real(field::exemplar_value, scaled(e.value, decimals));
    put_timestamp(p, field::exemplar_timestamp, e.timestamp_us);
    p.close();
}

template <class Pass>
void put_histogram(
    Pass& p, const family_spec& spec, const series& s, std::uint64_t created_us, scratch& sc) {
    p.uint(field::histogram_count, s.count);
    p.real(field::histogram_sum, scaled(s.sum, spec.decimals));
    if (!spec.bounds.empty()) {
        if (sc.upper_of != &spec) {
            sc.upper_of = &spec;
            sc.upper.clear();
            for (const double b : spec.bounds) {
                sc.upper.push_back(shown_bound(b, spec.decimals));
            }
        }
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= spec.bounds.size(); ++i) {
            const bool inf = i == spec.bounds.size();
            if (!inf && i >= s.buckets.size()) {
                continue;
            }
            cumulative = inf ? s.count : cumulative + s.buckets[i];
            p.open(field::histogram_bucket);
            p.uint(field::bucket_cumulative_count, cumulative);
            p.real(field::bucket_upper_bound,
                   inf ? std::numeric_limits<double>::infinity() : sc.upper[i]);
            put_exemplar(p, field::bucket_exemplar, s, i, spec.decimals, sc);
            p.close();
        }
    }
    if (spec.native) {
        p.sint(field::histogram_schema, s.native_schema);
        p.real(field::histogram_zero_threshold, native::zero_threshold);
        p.uint(field::histogram_zero_count, s.zero_count);
        native::to_spans(s.native_first, s.native_buckets, sc.spans, sc.deltas);
        if (sc.spans.empty()) {
            // No bucket: an empty span still says "native" to Prometheus versions that look
            // for spans rather than a zero threshold.
            p.open(field::histogram_positive_span);
            p.close();
        }
        for (const native::bucket_span& span : sc.spans) {
            p.open(field::histogram_positive_span);
            p.sint(field::span_offset, span.offset);
            p.uint(field::span_length, span.length);
            p.close();
        }
        if (!sc.deltas.empty()) {
            p.open(field::histogram_positive_delta);  // packed
            for (const std::int64_t d : sc.deltas) {
                p.element(zigzag(d));
            }
            p.close();
        }
    }
    put_timestamp(p, field::histogram_created, created_us);
    if (spec.native && spec.bounds.empty()) {
        put_exemplar(p, field::histogram_exemplars, s, 0, spec.decimals, sc);
    }
}

template <class Pass>
void put_metric(
    Pass& p, const family_spec& spec, const snapshot& snap, const series& s, scratch& sc) {
    p.open(field::family_metric);
    for (const label& l : snap.labels) {
        put_label(p, field::metric_label, l.name, valid_utf8(l.value, sc.text));
    }
    for (std::size_t i = 0; i < spec.label_names.size() && i < s.label_values.size(); ++i) {
        put_label(p, field::metric_label, spec.label_names[i],
                  valid_utf8(s.label_values[i], sc.text));
    }
    switch (spec.type) {
        case metric_type::counter:
            p.open(field::metric_counter);
            p.real(field::value, scaled(s.value, spec.decimals));
            put_timestamp(p, field::counter_created, snap.start_time_us);
            p.close();
            break;
        case metric_type::gauge:
            p.open(field::metric_gauge);
            p.real(field::value, scaled(s.value, spec.decimals));
            p.close();
            break;
        case metric_type::summary:
            p.open(field::metric_summary);
            p.uint(field::summary_count, s.count);
            p.real(field::summary_sum, scaled(s.sum, spec.decimals));
            put_timestamp(p, field::summary_created, snap.start_time_us);
            p.close();
            break;
        case metric_type::histogram:
            p.open(field::metric_histogram);
            put_histogram(p, spec, s, snap.start_time_us, sc);
            p.close();
            break;
    }
    p.close();
}

/// One delimited MetricFamily: `head`'s descriptors, the series of `parts`.
template <class Pass>
void put_family(Pass& p,
                std::span<const std::shared_ptr<const snapshot>> snapshots,
                const family_spec& head,
                std::span<const family_part> parts,
                scratch& sc) {
    p.open(0);
    p.string(field::family_name, head.name);
    p.string(field::family_help, valid_utf8(head.help, sc.text));
    p.uint(field::family_type, type_code(head.type));
    for (const family_part& part : parts) {
        for (const series& s : part.family->series) {
            put_metric(p, part.family->spec, *snapshots[part.snapshot], s, sc);
        }
    }
    p.string(field::family_unit, head.unit);
    p.close();
}

template <class Pass>
void put_all(Pass& p, std::span<const std::shared_ptr<const snapshot>> snapshots) {
    scratch sc;
    for_each_merged_family(
        snapshots, [&](const family_snapshot& head, std::span<const family_part> parts) {
            // One MetricFamily per run of parts that agree on `native`: Prometheus 2.42 reads a
            // family's every series as its first one.
            std::size_t k = 0;
            while (k < parts.size()) {
                std::size_t end = k + 1;
                while (end < parts.size() &&
                       parts[end].family->spec.native == parts[k].family->spec.native) {
                    ++end;
                }
                put_family(p, snapshots, head.spec, parts.subspan(k, end - k), sc);
                k = end;
            }
        });
}

}  // namespace

void render_protobuf(std::span<const std::shared_ptr<const snapshot>> snapshots, std::string& out) {
    std::vector<std::uint32_t> sizes;
    size_pass measure(sizes);
    put_all(measure, snapshots);
    const std::size_t at = out.size();
    out.resize(at + measure.total());
    write_pass write(out.data() + at, sizes);
    put_all(write, snapshots);
    assert(write.end() == out.data() + out.size());
}

}  // namespace xtel::metrics::detail
