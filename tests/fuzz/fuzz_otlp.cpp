// Fuzz target: what xtel-exporter reads from outside for OTLP. The input's first line is the
// Content-Type of a receiver's 2xx answer and the rest its body (parse_otlp_response); the
// same bytes, split at '\n', are also the values of the OTEL_* variables (otlp_options_from).
// The only acceptable failure is xtel::config_error from the settings, and its message is one
// line; what the settings accept is a URL libcurl takes and headers that cannot end early.
// The same bytes are last the observations of a native histogram (encode_native below): what
// the OTLP and remote-write encoders make of any buckets a series can reach, downscales and
// delta points across them included.

#include <snappy.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "otlp_metrics.pb.h"
#include "prometheus_remote_write.pb.h"
#include "xtel/core/error.hpp"
#include "xtel/metrics/metric_store.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/snapshot.hpp"
#include "xtel/push/otlp.hpp"
#include "xtel/push/otlp_config.hpp"
#include "xtel/push/remote_write.hpp"

namespace {

using snapshots = std::vector<std::shared_ptr<const xtel::metrics::snapshot>>;

/// The observations of the point's zero bucket and positive buckets: its count, when whole.
std::uint64_t observations(const xtel::otlp::ExportMetricsServiceRequest& r) {
    const auto& p =
        r.resource_metrics(0).scope_metrics(0).metrics(0).exponential_histogram().data_points(0);
    std::uint64_t n = p.zero_count();
    for (const std::uint64_t c : p.positive().bucket_counts()) {
        n += c;
    }
    if (n != p.count()) {
        __builtin_trap();
    }
    return n;
}

/// One export, of each encoder of a pair (the second writing JSON, for what its writer does with
/// any point: an encode moves a delta encoder on); the protobuf decoded.
struct encoders {
    explicit encoders(xtel::push::otlp_temporality t) : protobuf({}, t), json({}, t) {}
    xtel::push::otlp_encoder protobuf;
    xtel::push::otlp_encoder json;
};

xtel::otlp::ExportMetricsServiceRequest otlp_request(encoders& e,
                                                     const snapshots& s,
                                                     std::uint64_t now_ns) {
    e.json.encode(s, now_ns, xtel::push::otlp_encoding::json);
    xtel::otlp::ExportMetricsServiceRequest r;
    if (!r.ParseFromString(e.protobuf.encode(s, now_ns, xtel::push::otlp_encoding::protobuf))) {
        __builtin_trap();
    }
    return r;
}

/// The remote-write histogram's spans cover its deltas, whose running sum never goes below 0,
/// and its buckets and zero bucket hold its count.
void check_remote_write(const snapshots& s) {
    const std::string body = xtel::push::encode_write_request(s, 1);
    std::string serialized;
    xtel::prompb::WriteRequest w;
    if (!snappy::Uncompress(body.data(), body.size(), &serialized) ||
        !w.ParseFromString(serialized) || w.timeseries_size() != 1 ||
        w.timeseries(0).histograms_size() != 1) {
        __builtin_trap();
    }
    const auto& h = w.timeseries(0).histograms(0);
    std::uint64_t spanned = 0;
    for (const auto& span : h.positive_spans()) {
        spanned += span.length();
    }
    std::int64_t count = 0;
    std::uint64_t n = h.zero_count_int();
    for (const std::int64_t d : h.positive_deltas()) {
        count += d;
        if (count < 0) {
            __builtin_trap();
        }
        n += static_cast<std::uint64_t>(count);
    }
    if (spanned != static_cast<std::uint64_t>(h.positive_deltas_size()) || n != h.count_int()) {
        __builtin_trap();
    }
}

/// The input's first byte as a native schema (-4 to 8), the rest as observations in µs (4
/// bytes each, so that 1 µs to an hour and more widen the buckets past what a series keeps),
/// pushed with delta temporality after the first half and after the rest, and cumulatively
/// at the end: the two delta points hold every observation once.
void encode_native(std::string_view input) {
    if (input.empty()) {
        return;
    }
    using namespace xtel;
    const auto schema =
        static_cast<std::int8_t>(static_cast<int>(static_cast<unsigned char>(input[0]) % 13) - 4);
    metrics::metric_store store;
    const auto id = store.add_family({.name = "xtel_fuzz_seconds",
                                      .help = "Fuzzed.",
                                      .type = metrics::metric_type::histogram,
                                      .label_names = {},
                                      .decimals = 6,
                                      .bounds = {},
                                      .unit = "seconds",
                                      .native = true,
                                      .native_schema = schema});
    const auto series = store.series_of(id, {});
    std::vector<std::uint32_t> values((input.size() - 1) / 4);
    if (!values.empty()) {  // memcpy's pointers must not be null, even for 0 bytes
        std::memcpy(values.data(), input.data() + 1, values.size() * 4);
    }
    // Only the histogram: every store has its folded-updates family too.
    const std::vector<bool> served = [&] {
        std::vector<bool> out(id + 1, false);
        out[id] = true;
        return out;
    }();
    const auto snapshot_now = [&] {
        return snapshots{std::make_shared<metrics::snapshot>(
            metrics::take_snapshot(store, {{"agent_name", "fuzz"}}, &served))};
    };
    encoders delta(push::otlp_temporality::delta);
    std::size_t i = 0;
    for (; i < values.size() / 2; ++i) {
        store.observe(series, values[i]);
    }
    const std::uint64_t first = observations(otlp_request(delta, snapshot_now(), 1));
    for (; i < values.size(); ++i) {
        store.observe(series, values[i]);
    }
    const auto all = snapshot_now();
    const std::uint64_t second = observations(otlp_request(delta, all, 2));
    encoders cumulative(push::otlp_temporality::cumulative);
    if (observations(otlp_request(cumulative, all, 2)) != first + second ||
        first + second != values.size()) {
        __builtin_trap();
    }
    check_remote_write(all);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto nl = input.find('\n');
    const std::string_view type = input.substr(0, nl);
    const std::string_view body =
        nl == std::string_view::npos ? std::string_view{} : input.substr(nl + 1);
    if (const auto p = xtel::push::parse_otlp_response(body, type)) {
        // The message is cut to what a log line may hold, without control characters.
        if (p->error_message.size() > 512) {
            __builtin_trap();
        }
        for (const char c : p->error_message) {
            if (static_cast<unsigned char>(c) < 0x20) {
                __builtin_trap();
            }
        }
    }

    static const char* const vars[] = {
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT",  "OTEL_EXPORTER_OTLP_COMPRESSION",
        "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
        "OTEL_METRICS_EXPORTER",
    };
    std::map<std::string, std::string> table;
    std::string_view rest = input;
    for (const char* var : vars) {
        const auto end = rest.find('\n');
        table[var] = std::string(rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
    const auto lookup = [&](std::string_view name) -> std::optional<std::string> {
        if (const auto it = table.find(std::string(name)); it != table.end()) {
            return it->second;
        }
        return std::nullopt;
    };
    try {
        if (const auto o = xtel::push::otlp_options_from(lookup, {}, "host")) {
            // What the settings let through is what the sender's headers become.
            for (const auto& [name, value] : o->headers) {
                if (name.empty() || value.find_first_of("\r\n") != std::string::npos) {
                    __builtin_trap();
                }
            }
            // The URL is one libcurl takes: a scheme, a host, no space or control byte.
            if (!o->url.starts_with("http://") && !o->url.starts_with("https://")) {
                __builtin_trap();
            }
            const std::string_view after_scheme =
                std::string_view(o->url).substr(o->url.find("://") + 3);
            if (after_scheme.empty() || after_scheme[0] == '/' || after_scheme[0] == ':') {
                __builtin_trap();
            }
            for (const char c : o->url) {
                if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
                    __builtin_trap();
                }
            }
        }
    } catch (const xtel::config_error& e) {
        // One line whatever the bytes: the value's control bytes are shown escaped.
        for (const char c : std::string_view(e.what())) {
            if (static_cast<unsigned char>(c) < 0x20) {
                __builtin_trap();
            }
        }
    }
    encode_native(input);
    return 0;
}
