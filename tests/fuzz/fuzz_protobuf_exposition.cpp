// Fuzz target: the protobuf exposition (render(..., exposition::protobuf)). The input is
// decoded as an encoded snapshot (a node file's payload, what xtel-exporter serves); one the
// codec refuses is instead read as a native histogram's schema, decimals and observations (2
// bytes each), observed into a real metric store. The snapshot is rendered as two agents'.
// Besides a crash, a leak or undefined behaviour, a finding is a body that is not a sequence of
// delimited io.prometheus.client.MetricFamily messages, as this file's wire walker reads them:
//   - every length within its message, every field of the number and wire type the format
//     gives it (client_model's metrics.proto), every string valid UTF-8;
//   - a native histogram with a zero threshold above 0 (what Prometheus 2.42 tells them by),
//     its spans' lengths adding up to its deltas, and its counts (zero count and the running
//     sums of the deltas) never negative and adding up to its sample count;
//   - as many Metric messages as the snapshots have series.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace {

namespace metrics = xtel::metrics;

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "fuzz_protobuf_exposition: %s\n", what);
    std::abort();
}

/// The messages of the format that the walker knows.
enum class kind {
    family,
    metric,
    label,
    counter,
    gauge,
    summary,
    histogram,
    bucket,
    span,
    exemplar,
    timestamp,
    none
};

/// What field `f` of a message of kind `k` is: its wire type and, for a message, its kind;
/// wire -1: not a field of the format.
struct field_info {
    int wire = -1;
    kind nested = kind::none;
    bool utf8 = false;
    bool packed_sint = false;
};

field_info info(kind k, std::uint64_t f) {
    constexpr int varint = 0, fixed64 = 1, length = 2;
    switch (k) {
        case kind::family:
            if (f == 1 || f == 2 || f == 5)
                return {length, kind::none, true};
            if (f == 3)
                return {varint};
            if (f == 4)
                return {length, kind::metric};
            break;
        case kind::metric:
            if (f == 1)
                return {length, kind::label};
            if (f == 2)
                return {length, kind::gauge};
            if (f == 3)
                return {length, kind::counter};
            if (f == 4)
                return {length, kind::summary};
            if (f == 7)
                return {length, kind::histogram};
            if (f == 6)
                return {varint};
            break;
        case kind::label:
            if (f == 1 || f == 2)
                return {length, kind::none, true};
            break;
        case kind::gauge:
            if (f == 1)
                return {fixed64};
            break;
        case kind::counter:
            if (f == 1)
                return {fixed64};
            if (f == 2)
                return {length, kind::exemplar};
            if (f == 3)
                return {length, kind::timestamp};
            break;
        case kind::summary:
            if (f == 1)
                return {varint};
            if (f == 2)
                return {fixed64};
            if (f == 4)
                return {length, kind::timestamp};
            break;
        case kind::histogram:
            if (f == 1 || f == 5 || f == 7)
                return {varint};
            if (f == 2 || f == 6)
                return {fixed64};
            if (f == 3)
                return {length, kind::bucket};
            if (f == 12)
                return {length, kind::span};
            if (f == 13)
                return {length, kind::none, false, true};
            if (f == 15)
                return {length, kind::timestamp};
            if (f == 16)
                return {length, kind::exemplar};
            break;
        case kind::bucket:
            if (f == 1)
                return {varint};
            if (f == 2)
                return {fixed64};
            if (f == 3)
                return {length, kind::exemplar};
            break;
        case kind::span:
            if (f == 1 || f == 2)
                return {varint};
            break;
        case kind::exemplar:
            if (f == 1)
                return {length, kind::label};
            if (f == 2)
                return {fixed64};
            if (f == 3)
                return {length, kind::timestamp};
            break;
        case kind::timestamp:
            if (f == 1 || f == 2)
                return {varint};
            break;
        case kind::none:
            break;
    }
    return {};
}

bool take_varint(std::string_view& in, std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (in.empty()) {
            return false;
        }
        const auto b = static_cast<unsigned char>(in[0]);
        in.remove_prefix(1);
        v |= std::uint64_t{b & 0x7Fu} << shift;
        if (b < 0x80) {
            return true;
        }
    }
    return false;
}

std::int64_t unzigzag(std::uint64_t v) {
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

/// What the walker saw of one Histogram, checked when it ends.
struct histogram_seen {
    std::uint64_t count = 0;
    std::uint64_t zero_count = 0;
    double zero_threshold = 0;
    bool native = false;  // any native field
    std::uint64_t span_buckets = 0;
    std::vector<std::int64_t> deltas;
};

struct walker {
    std::size_t metrics = 0;
    histogram_seen* histogram = nullptr;
    std::uint64_t span_length = 0;  // of the span being walked

    void walk(std::string_view in, kind k) {
        histogram_seen seen;
        if (k == kind::histogram) {
            histogram = &seen;
        }
        if (k == kind::metric) {
            ++metrics;
        }
        while (!in.empty()) {
            std::uint64_t tag = 0;
            if (!take_varint(in, tag)) {
                finding("a tag runs past its message");
            }
            const field_info fi = info(k, tag >> 3);
            if (fi.wire < 0 || static_cast<int>(tag & 7) != fi.wire) {
                finding("a field the format does not have, or of another wire type");
            }
            std::uint64_t v = 0;
            if (fi.wire == 0) {
                if (!take_varint(in, v)) {
                    finding("a varint runs past its message");
                }
                on_varint(k, tag >> 3, v);
            } else if (fi.wire == 1) {
                if (in.size() < 8) {
                    finding("a double runs past its message");
                }
                std::uint64_t bits = 0;
                for (int i = 7; i >= 0; --i) {
                    bits = bits << 8 | static_cast<unsigned char>(in[static_cast<std::size_t>(i)]);
                }
                in.remove_prefix(8);
                if (k == kind::histogram && (tag >> 3) == 6) {
                    seen.zero_threshold = std::bit_cast<double>(bits);
                    seen.native = true;
                }
            } else {
                if (!take_varint(in, v) || v > in.size()) {
                    finding("a length runs past its message");
                }
                const std::string_view body = in.substr(0, v);
                in.remove_prefix(v);
                if (fi.utf8 && !metrics::is_utf8(body)) {
                    finding("a string that is not UTF-8");
                }
                if (fi.packed_sint) {
                    std::string_view rest = body;
                    while (!rest.empty()) {
                        std::uint64_t d = 0;
                        if (!take_varint(rest, d)) {
                            finding("a packed delta runs past its field");
                        }
                        seen.deltas.push_back(unzigzag(d));
                    }
                    seen.native = true;
                } else if (fi.nested != kind::none) {
                    histogram_seen* outer = histogram;
                    walk(body, fi.nested);
                    histogram = outer;
                }
            }
        }
        if (k == kind::span) {
            histogram->span_buckets += span_length;
            histogram->native = true;
            span_length = 0;
        }
        if (k == kind::histogram) {
            check(seen);
        }
    }

    void on_varint(kind k, std::uint64_t f, std::uint64_t v) {
        if (k == kind::histogram && f == 1) {
            histogram->count = v;
        } else if (k == kind::histogram && f == 7) {
            histogram->zero_count = v;
            histogram->native = true;
        } else if (k == kind::histogram && f == 5) {
            histogram->native = true;
        } else if (k == kind::span && f == 2) {
            span_length = v;
        }
    }

    static void check(const histogram_seen& h) {
        if (!h.native) {
            return;
        }
        if (!(h.zero_threshold > 0)) {
            finding("a native histogram whose zero threshold is not above 0");
        }
        if (h.span_buckets != h.deltas.size()) {
            finding("a native histogram whose spans do not cover its deltas");
        }
        std::int64_t bucket = 0;
        std::uint64_t total = h.zero_count;
        for (const std::int64_t d : h.deltas) {
            bucket += d;
            if (bucket < 0) {
                finding("a native bucket with a negative count");
            }
            total += static_cast<std::uint64_t>(bucket);
        }
        if (total != h.count) {
            finding("a native histogram whose buckets do not add up to its count");
        }
    }
};

/// The input as observations of a native histogram: byte 0 the schema, byte 1 the decimals,
/// then each 2 bytes an observation.
metrics::snapshot observed(std::string_view in) {
    metrics::metric_store store;
    metrics::family_spec spec;
    spec.name = "fuzz_seconds";
    spec.type = metrics::metric_type::histogram;
    spec.native = true;
    spec.native_schema = static_cast<std::int8_t>(
        in.empty() ? 3 : static_cast<unsigned char>(in[0]) % 13 + metrics::native::min_schema);
    spec.decimals =
        static_cast<std::uint8_t>(in.size() < 2 ? 0 : static_cast<unsigned char>(in[1]) % 7);
    if (in.size() > 1 && (in[1] & 0x80) != 0) {
        spec.bounds = {1, 10, 100};
    }
    const auto h = store.add_family(spec);
    const auto s = store.series_of(h, {});
    for (std::size_t i = 2; i + 1 < in.size(); i += 2) {
        const auto v = static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << 8 |
                       static_cast<unsigned char>(in[i + 1]);
        store.observe(s, v * v * v);  // wide spread: past 160 buckets the schema goes down
    }
    return metrics::take_snapshot(store, {{"agent_name", "a"}});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    metrics::snapshot snap;
    try {
        snap = metrics::decode_snapshot(std::span(reinterpret_cast<const std::byte*>(data), size));
    } catch (const metrics::snapshot_decode_error&) {
        snap = observed(std::string_view(reinterpret_cast<const char*>(data), size));
    }
    auto one = std::make_shared<const metrics::snapshot>(std::move(snap));
    const std::vector<std::shared_ptr<const metrics::snapshot>> two = {one, one};
    std::string body;
    metrics::render(two, body, metrics::exposition::protobuf);

    walker w;
    std::string_view in = body;
    while (!in.empty()) {
        std::uint64_t length = 0;
        if (!take_varint(in, length) || length > in.size()) {
            finding("a MetricFamily's length runs past the body");
        }
        w.walk(in.substr(0, length), kind::family);
        in.remove_prefix(length);
    }
    std::size_t series = 0;
    for (const auto& f : one->families) {
        series += 2 * f.series.size();
    }
    if (w.metrics != series) {
        finding("not one Metric per series");
    }
    return 0;
}
