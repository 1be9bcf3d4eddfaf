// Fuzz target: decode arbitrary bytes as an encoded snapshot (the node snapshot file's payload,
// src/metrics/snapshot_decode*.cpp). Any input must end in snapshot_decode_error or a snapshot,
// never a crash, an out-of-bounds read or an allocation the input does not justify. Besides
// those, a finding is an accepted input that
// - does not encode back to the same bytes: the decoder accepts only the one encoding
//   encode_snapshot gives each snapshot (an input of an older version, which the encoder no
//   longer writes, must encode to what decodes to the same snapshot);
// - renders, as xtel-exporter serves it (the writer's pid added), a body in text 0.0.4 or
//   OpenMetrics with a line that is not well formed: every line is a `# HELP|TYPE|UNIT` line
//   of the family being shown, `# EOF` (OpenMetrics, last), or a sample line of that family
//   with well-formed, unique labels and a number, and no series is shown twice. One crafted
//   file must not be able to break the scrape of the whole node;
// - holds native buckets that break what docs/node-format.md promises readers (xtel top adds
//   them up by index, Prometheus refuses buckets that hold more than the count): native only
//   on a histogram, schemas within -4 to 8 and a series' no higher than its family's, at most
//   160 buckets, every index an int32, the buckets and the zero bucket adding up to the count.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/exposition_rules.hpp"
#include "xtel/metrics/native_histogram.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace {

using xtel::metrics::exposition;
using xtel::metrics::metric_type;

[[noreturn]] void finding(std::string_view what, std::string_view line, exposition format) {
    std::fprintf(stderr, "fuzz_snapshot_codec: %s (%s): %.*s\n", std::string(what).c_str(),
                 format == exposition::text ? "text" : "OpenMetrics", static_cast<int>(line.size()),
                 line.data());
    std::abort();
}

/// The name at `line[i]` in the metric name alphabet; advances `i` past it.
std::string_view take_name(std::string_view line, std::size_t& i) {
    const std::size_t start = i;
    while (i < line.size() && (xtel::metrics::is_name_char(line[i]) || line[i] == ':')) {
        ++i;
    }
    return line.substr(start, i - start);
}

/// `{name="value",...}` at `line[i]`, names valid and unique, values escaped as the formats
/// escape them; the labels go to `out` (values still escaped). False when malformed.
bool take_labels(std::string_view line,
                 std::size_t& i,
                 std::vector<std::pair<std::string, std::string>>& out) {
    out.clear();
    if (i >= line.size() || line[i] != '{') {
        return false;
    }
    ++i;
    while (true) {
        const std::string_view name = take_name(line, i);
        if (!xtel::metrics::is_label_name(name) || line.substr(i, 2) != "=\"") {
            return false;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
            if (line[i] == '\\') {
                if (i + 1 >= line.size() ||
                    std::string_view("\\\"n").find(line[i + 1]) == std::string_view::npos) {
                    return false;
                }
                value += line[i];
                ++i;
            }
            value += line[i];
            ++i;
        }
        if (i >= line.size()) {
            return false;
        }
        ++i;  // the closing quote
        for (const auto& l : out) {
            if (l.first == name) {
                return false;
            }
        }
        out.emplace_back(std::string(name), std::move(value));
        if (i < line.size() && line[i] == ',') {
            ++i;
            continue;
        }
        if (i < line.size() && line[i] == '}') {
            ++i;
            return true;
        }
        return false;
    }
}

/// A sample value as the renderer writes them: digits, at most one '.' between digits.
bool is_number(std::string_view v) {
    const auto dot = v.find('.');
    const auto digits = [](std::string_view d) {
        return !d.empty() &&
               std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    return dot == std::string_view::npos ? digits(v)
                                         : digits(v.substr(0, dot)) && digits(v.substr(dot + 1));
}

/// The suffixes a sample line of a family of type `t` may add to the family's name.
std::vector<std::string_view> sample_suffixes(metric_type t) {
    switch (t) {
        case metric_type::counter:
        case metric_type::gauge:
            return {""};
        case metric_type::histogram:
            return {"_bucket", "_sum", "_count"};
        case metric_type::summary:
            return {"_sum", "_count"};
    }
    return {};
}

/// Checks the body `render` wrote for `snap` in `format`.
void check_body(const xtel::metrics::snapshot& snap, const std::string& body, exposition format) {
    if (!body.empty() && body.back() != '\n') {
        finding("the body does not end with a line feed", body.substr(body.size() - 1), format);
    }
    std::string_view rest = body;
    const xtel::metrics::family_spec* family = nullptr;  // of the last descriptor line
    std::set<std::string> series_seen;
    std::vector<std::pair<std::string, std::string>> labels;
    bool eof = false;
    while (!rest.empty()) {
        const auto nl = rest.find('\n');
        const std::string_view line = rest.substr(0, nl);
        rest.remove_prefix(nl + 1);
        if (eof) {
            finding("a line after # EOF", line, format);
        }
        if (line == "# EOF") {
            if (format != exposition::openmetrics || !rest.empty()) {
                finding("# EOF other than last in OpenMetrics", line, format);
            }
            eof = true;
            continue;
        }
        if (line.starts_with("#")) {
            std::size_t i = 0;
            std::string_view keyword;
            for (const std::string_view k : {"# HELP ", "# TYPE ", "# UNIT "}) {
                if (line.starts_with(k)) {
                    keyword = k;
                }
            }
            if (keyword.empty() || (keyword == "# UNIT " && format == exposition::text)) {
                finding("a comment line other than HELP, TYPE and UNIT", line, format);
            }
            i = keyword.size();
            const std::string_view name = take_name(line, i);
            if (i >= line.size() || line[i] != ' ') {
                finding("a descriptor line without a name and a space", line, format);
            }
            const std::string_view text = line.substr(i + 1);
            // The family the line names, by its name as the format shows it (and, for a TYPE
            // line, its type: in OpenMetrics gauge x and counter x_total are both x, and only
            // the first is shown). The samples after it are that family's.
            const auto shown_name = [&](const xtel::metrics::family_spec& f) {
                std::string n = f.name;
                if (format == exposition::openmetrics && f.type == metric_type::counter &&
                    n.ends_with("_total")) {
                    n.resize(n.size() - 6);
                }
                return n;
            };
            if (keyword == "# TYPE " || family == nullptr || shown_name(*family) != name) {
                family = nullptr;
                for (const auto& f : snap.families) {
                    if (shown_name(f.spec) == name &&
                        (keyword != "# TYPE " || text == xtel::metrics::to_string(f.spec.type))) {
                        family = &f.spec;
                        break;
                    }
                }
            }
            if (family == nullptr) {
                finding("a descriptor line of no family of the snapshot", line, format);
            }
            if (keyword == "# UNIT " && (text != family->unit || text.empty())) {
                finding("a UNIT line other than the family's unit", line, format);
            }
            continue;
        }
        // A sample line: name{labels} value[ # {exemplar} value[ timestamp]].
        std::size_t i = 0;
        const std::string_view name = take_name(line, i);
        if (!xtel::metrics::is_metric_name(name) || family == nullptr) {
            finding("a sample line that does not start with a metric name of a family", line,
                    format);
        }
        const auto suffixes = sample_suffixes(family->type);
        if (std::none_of(suffixes.begin(), suffixes.end(), [&](std::string_view s) {
                return std::string(name) == family->name + std::string(s);
            })) {
            finding("a sample line of another family than the descriptor line's", line, format);
        }
        labels.clear();
        if (i < line.size() && line[i] == '{' && !take_labels(line, i, labels)) {
            finding("malformed or repeated labels", line, format);
        }
        if (i >= line.size() || line[i] != ' ') {
            finding("no space before the value", line, format);
        }
        ++i;
        const auto value_end = line.find(' ', i);
        if (!is_number(line.substr(i, value_end - i))) {
            finding("a value that is not a number", line, format);
        }
        if (value_end != std::string_view::npos) {
            // Only an OpenMetrics bucket's exemplar may follow: ` # {labels} value[ ts]`, its
            // labels trace_id, span_id and its own, at most 128 characters together.
            if (format != exposition::openmetrics || !name.ends_with("_bucket") ||
                line.substr(value_end, 3) != " # ") {
                finding("text after the value that is not an exemplar", line, format);
            }
            std::size_t j = value_end + 3;
            std::vector<std::pair<std::string, std::string>> exemplar;
            if (!take_labels(line, j, exemplar) || exemplar.empty() || exemplar.size() > 3 ||
                j >= line.size() || line[j] != ' ') {
                finding("a malformed exemplar", line, format);
            }
            std::size_t characters = 0;
            for (const auto& [n, v] : exemplar) {
                characters += n.size();
                // A code point per byte that does not continue one; an escape (\\, \", \n)
                // is the one character after its backslash.
                for (std::size_t k = 0; k < v.size(); ++k) {
                    if (v[k] == '\\') {
                        ++characters;  // take_labels checked that a character follows
                        ++k;
                        continue;
                    }
                    characters += (static_cast<unsigned char>(v[k]) & 0xC0) != 0x80 ? 1 : 0;
                }
            }
            if (characters > 128) {
                finding("an exemplar of more than 128 characters", line, format);
            }
            std::string_view numbers = line.substr(j + 1);
            const auto space = numbers.find(' ');
            if (!is_number(numbers.substr(0, space)) ||
                (space != std::string_view::npos && !is_number(numbers.substr(space + 1)))) {
                finding("an exemplar's value or timestamp that is not a number", line, format);
            }
        }
        if (format == exposition::openmetrics && family->type == metric_type::counter &&
            !name.ends_with("_total")) {
            finding("an OpenMetrics counter sample without _total", line, format);
        }
        std::sort(labels.begin(), labels.end());
        std::string key(name);
        for (const auto& [n, v] : labels) {
            key += '\x1f' + n + '=' + v;
        }
        if (!series_seen.insert(key).second) {
            finding("a series shown twice", line, format);
        }
    }
    if (format == exposition::openmetrics && !eof) {
        finding("an OpenMetrics body without # EOF", body, format);
    }
}

/// Aborts when an accepted snapshot's native buckets break what readers rely on.
void check_native(const xtel::metrics::snapshot& s) {
    namespace native = xtel::metrics::native;
    for (const auto& f : s.families) {
        const auto& spec = f.spec;
        if (spec.native_schema < native::min_schema || spec.native_schema > native::max_schema ||
            (spec.native && spec.type != metric_type::histogram)) {
            finding("a family's native spec out of its rules", spec.name, exposition::text);
        }
        for (const auto& x : f.series) {
            if (!spec.native) {
                if (!x.native_buckets.empty() || x.zero_count != 0 || x.native_first != 0 ||
                    x.native_schema != 0) {
                    finding("native buckets in a family without native", spec.name,
                            exposition::text);
                }
                continue;
            }
            std::uint64_t total = x.zero_count;
            bool wraps = false;
            for (const auto b : x.native_buckets) {
                wraps = wraps || b > UINT64_MAX - total;
                total += b;
            }
            if (x.native_schema < native::min_schema || x.native_schema > spec.native_schema ||
                x.native_buckets.size() > native::max_buckets ||
                std::int64_t{x.native_first} + static_cast<std::int64_t>(x.native_buckets.size()) -
                        1 >
                    INT32_MAX ||
                wraps || total != x.count) {
                finding("a series' native buckets out of their rules", spec.name, exposition::text);
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    xtel::metrics::snapshot s;
    try {
        s = xtel::metrics::decode_snapshot(input);
    } catch (const xtel::metrics::snapshot_decode_error&) {
        return 0;
    }
    std::vector<std::byte> again;
    xtel::metrics::encode_snapshot(s, again);
    const bool current = size > 4 && data[4] == xtel::metrics::snapshot_codec_version;
    if (!current) {
        if (!(xtel::metrics::decode_snapshot(again) == s)) {
            std::fprintf(stderr,
                         "fuzz_snapshot_codec: an older version encodes to another "
                         "snapshot\n");
            std::abort();
        }
    } else if (!std::equal(again.begin(), again.end(), input.begin(), input.end())) {
        std::fprintf(stderr, "fuzz_snapshot_codec: an accepted input encodes to other bytes\n");
        std::abort();
    }

    check_native(s);

    // As xtel-exporter serves it: the writer's pid after the snapshot's own labels.
    s.labels.push_back({"pid", "4242"});
    const std::vector<std::shared_ptr<const xtel::metrics::snapshot>> served = {
        std::make_shared<const xtel::metrics::snapshot>(s)};
    for (const exposition format : {exposition::text, exposition::openmetrics}) {
        std::string body;
        xtel::metrics::render(served, body, format);
        check_body(*served[0], body, format);
    }
    return 0;
}
