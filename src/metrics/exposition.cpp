#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/openmetrics_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "metrics/exposition_walk.hpp"
#include "metrics/protobuf_exposition.hpp"
#include "xtel/metrics/exposition_rules.hpp"

namespace xtel::metrics {

namespace {

using metrics::family_snapshot;
using metrics::metric_type;

using metrics::utf8_sequence;

/// Appends `in` escaped for the exposition format; bytes that are not UTF-8 become U+FFFD,
/// since Prometheus rejects a whole scrape over one invalid label value.
void append_escaped(std::string& out, std::string_view in, bool quote) {
    while (!in.empty()) {
        // Most values are plain ASCII with nothing to escape: copied in one append per run.
        std::size_t plain = 0;
        while (plain < in.size()) {
            const auto c = static_cast<unsigned char>(in[plain]);
            if (c >= 0x80 || c == '\\' || c == '\n' || (c == '"' && quote)) {
                break;
            }
            ++plain;
        }
        out.append(in.data(), plain);
        in.remove_prefix(plain);
        if (in.empty()) {
            break;
        }
        const std::size_t n = utf8_sequence(in);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            in.remove_prefix(1);
            continue;
        }
        const char c = in[0];
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && quote) {
            out += "\\\"";
        } else {
            out.append(in.data(), n);
        }
        in.remove_prefix(n);
    }
}

void append_number(std::string& out, std::uint64_t v) {
    const fmt::format_int f(v);
    out.append(f.data(), f.size());
}

}  // namespace

void append_scaled(std::string& out, std::uint64_t v, std::uint8_t decimals) {
    if (decimals == 0) {
        append_number(out, v);
        return;
    }
    std::uint64_t scale = 1;
    for (std::uint8_t i = 0; i < decimals; ++i) {
        scale *= 10;
    }
    append_number(out, v / scale);
    out += '.';
    const fmt::format_int frac(v % scale);
    out.append(decimals - frac.size(), '0');
    out.append(frac.data(), frac.size());
}

namespace {

/// `name="value",...` for a snapshot's own labels, escaped.
std::string render_labels(std::span<const metrics::label> labels) {
    std::string out;
    for (const auto& l : labels) {
        if (!out.empty()) {
            out += ',';
        }
        out += l.name;
        out += "=\"";
        append_escaped(out, l.value, true);
        out += '"';
    }
    return out;
}

/// A series' labels as its sample lines show them between the braces (the snapshot's, then the
/// family's), escaped, into `out` (replaced): rendered once per series, not once per line, since
/// a histogram's series shows the same labels on every bucket, _sum and _count line.
void render_series_labels(std::string& out,
                          const family_snapshot& f,
                          const std::string& common,
                          const metrics::series& s) {
    out = common;
    bool first = common.empty();
    const auto& names = f.spec.label_names;
    for (std::size_t i = 0; i < names.size() && i < s.label_values.size(); ++i) {
        if (!first) {
            out += ',';
        }
        first = false;
        out += names[i];
        out += "=\"";
        append_escaped(out, s.label_values[i], true);
        out += '"';
    }
}

/// Writes one sample line's name and labels up to the closing brace and the space after it.
/// `labels` is render_series_labels'; `extra` is a last label already rendered (a histogram's
/// `le="..."`), or empty.
void append_head(std::string& out,
                 const family_snapshot& f,
                 std::string_view suffix,
                 const std::string& labels,
                 std::string_view extra) {
    out += f.spec.name;
    out += suffix;
    if (labels.empty() && extra.empty()) {
        out += ' ';  // a series without labels: no braces, as every client library writes it
        return;
    }
    out += '{';
    out += labels;
    if (!extra.empty()) {
        if (!labels.empty()) {
            out += ',';
        }
        out += extra;
    }
    out += "} ";
}

void append_descriptors(std::string& out,
                        const metrics::family_spec& spec,
                        exposition format,
                        metrics::openmetrics_form form) {
    if (format == exposition::text) {
        out += "# HELP ";
        out += spec.name;
        out += ' ';
        append_escaped(out, spec.help, false);
        out += "\n# TYPE ";
        out += spec.name;
        out += ' ';
        out += metrics::to_string(spec.type);
        out += '\n';
        return;
    }
    const bool unknown = form == metrics::openmetrics_form::unknown;
    const std::string_view name =
        unknown ? std::string_view(spec.name) : openmetrics_family_name(spec.name, spec.type);
    out += "# TYPE ";
    out += name;
    out += ' ';
    out += unknown ? std::string_view("unknown") : metrics::to_string(spec.type);
    out += '\n';
    // A unit must end the family's name, which an unknown counter's _total does.
    if (!spec.unit.empty() && !unknown) {
        out += "# UNIT ";
        out += name;
        out += ' ';
        out += spec.unit;
        out += '\n';
    }
    out += "# HELP ";
    out += name;
    out += ' ';
    append_escaped(out, spec.help, true);  // OpenMetrics escapes quotes in HELP as well
    out += '\n';
}

/// Appends `name="<id as lower-case hex>"`.
template <std::size_t N>
void append_id(std::string& out, std::string_view name, const std::array<std::uint8_t, N>& id) {
    const auto hex = detail::to_hex(id);
    out += name;
    out += "=\"";
    out.append(hex.data(), hex.size());
    out += '"';
}

/// Appends ` # {labels} value timestamp` for bucket `i`'s exemplar, when it has one that
/// OpenMetrics can carry, with the labels detail::labels_of gives it.
void append_exemplar(std::string& out,
                     const metrics::series& s,
                     std::size_t i,
                     std::uint8_t decimals) {
    if (i >= s.exemplars.size()) {
        return;
    }
    const metrics::exemplar& e = s.exemplars[i];
    const detail::exemplar_labels shown = detail::labels_of(e);
    if (!shown.shown) {
        return;
    }
    out += " # {";
    if (shown.trace) {
        append_id(out, "trace_id", e.trace_id);
        if (shown.span) {
            out += ',';
            append_id(out, "span_id", e.span_id);
        }
    }
    if (shown.own) {
        if (shown.trace) {
            out += ',';
        }
        out += e.label_name;
        out += "=\"";
        append_escaped(out, e.label_value, true);
        out += '"';
    }
    out += "} ";
    append_scaled(out, e.value, decimals);
    if (e.timestamp_us != 0) {
        out += ' ';
        append_scaled(out, e.timestamp_us, 6);  // seconds, to the microsecond
    }
}

void append_family(std::string& out,
                   const family_snapshot& f,
                   const std::string& common,
                   std::span<const std::string> le,
                   exposition format) {
    const bool exemplars = format == exposition::openmetrics;
    std::string labels;
    for (const metrics::series& s : f.series) {
        render_series_labels(labels, f, common, s);
        switch (f.spec.type) {
            case metric_type::counter:
            case metric_type::gauge:
                append_head(out, f, "", labels, {});
                append_scaled(out, s.value, f.spec.decimals);
                out += '\n';
                break;
            case metric_type::histogram: {
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i < le.size() && i < s.buckets.size(); ++i) {
                    cumulative += s.buckets[i];
                    append_head(out, f, "_bucket", labels, le[i]);
                    append_number(out, cumulative);
                    if (exemplars) {
                        append_exemplar(out, s, i, f.spec.decimals);
                    }
                    out += '\n';
                }
                append_head(out, f, "_bucket", labels, "le=\"+Inf\"");
                append_number(out, s.count);
                if (exemplars) {
                    append_exemplar(out, s, f.spec.bounds.size(), f.spec.decimals);
                }
                out += '\n';
                [[fallthrough]];
            }
            case metric_type::summary:
                append_head(out, f, "_sum", labels, {});
                append_scaled(out, s.sum, f.spec.decimals);
                out += '\n';
                append_head(out, f, "_count", labels, {});
                append_number(out, s.count);
                out += '\n';
                break;
        }
    }
}

}  // namespace

std::string format_bound(double b, std::uint8_t decimals) {
    if (b == std::floor(b) && b >= 0 && b < 1e15) {
        std::string out;
        append_scaled(out, static_cast<std::uint64_t>(b), decimals);
        if (decimals > 0) {
            out.erase(out.find_last_not_of('0') + 1);
            if (out.back() == '.') {
                out.pop_back();
            }
        }
        return out;
    }
    return fmt::format("{}", metrics::shown_bound(b, decimals));
}

std::string to_valid_utf8(std::string_view in) {
    std::string out;
    out.reserve(in.size());
    while (!in.empty()) {
        const std::size_t n = utf8_sequence(in);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            in.remove_prefix(1);
        } else {
            out.append(in.data(), n);
            in.remove_prefix(n);
        }
    }
    return out;
}

std::string escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    append_escaped(out, value, true);
    return out;
}

std::string escape_help(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    append_escaped(out, text, false);
    return out;
}

std::size_t render(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
                   std::string& out,
                   exposition format) {
    if (format == exposition::protobuf) {
        detail::render_protobuf(snapshots, out);
        return 0;
    }
    std::vector<std::string> common;
    common.reserve(snapshots.size());
    for (const auto& s : snapshots) {
        common.push_back(render_labels(s->labels));
    }
    std::vector<std::string> le;
    const metrics::family_spec* le_of = nullptr;  // whose bounds and decimals `le` shows
    metrics::openmetrics_claims claimed;          // OpenMetrics names of the families shown
    std::size_t left_out = 0;
    detail::for_each_merged_family(
        snapshots, [&](const family_snapshot& head, std::span<const detail::family_part> parts) {
            const metrics::openmetrics_form form =
                format == exposition::text ? metrics::openmetrics_form::typed
                                           : claimed.claim(head.spec.name, head.spec.type);
            if (form == metrics::openmetrics_form::left_out) {
                ++left_out;
                return;
            }
            append_descriptors(out, head.spec, format, form);
            for (const detail::family_part& part : parts) {
                const family_snapshot& f = *part.family;
                if (f.spec.type == metric_type::histogram &&
                    (le_of == nullptr || le_of->bounds != f.spec.bounds ||
                     le_of->decimals != f.spec.decimals)) {
                    le_of = &f.spec;
                    le.clear();
                    for (const double b : f.spec.bounds) {
                        le.push_back("le=\"" + format_bound(b, f.spec.decimals) + "\"");
                    }
                }
                append_family(out, f, common[part.snapshot], le, format);
            }
        });
    if (format == exposition::openmetrics) {
        out += "# EOF\n";
    }
    return left_out;
}

}  // namespace xtel::metrics
