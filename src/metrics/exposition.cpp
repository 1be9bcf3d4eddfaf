#include "xtel/metrics/exposition.hpp"
#include "xtel/metrics/openmetrics_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <unordered_set>
#include <vector>

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

bool is_label_name(std::string_view s) {
    const auto letter = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    return !s.empty() && letter(s[0]) && std::all_of(s.begin() + 1, s.end(), [&](char c) {
        return letter(c) || (c >= '0' && c <= '9');
    });
}

/// Characters of `s` once shown: each invalid byte becomes one U+FFFD.
std::size_t shown_characters(std::string_view s) {
    std::size_t n = 0;
    while (!s.empty()) {
        s.remove_prefix(std::max<std::size_t>(utf8_sequence(s), 1));
        ++n;
    }
    return n;
}

/// The characters an exemplar's labels may hold together, names and values (OpenMetrics 1.0).
constexpr std::size_t max_exemplar_characters = 128;

/// Appends `name="<id as lower-case hex>"`.
template <std::size_t N>
void append_id(std::string& out, std::string_view name, const std::array<std::uint8_t, N>& id) {
    constexpr char digits[] = "0123456789abcdef";
    out += name;
    out += "=\"";
    for (const std::uint8_t b : id) {
        out += digits[b >> 4];
        out += digits[b & 0xF];
    }
    out += '"';
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& id) {
    return std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; });
}

/// Appends ` # {labels} value timestamp` for bucket `i`'s exemplar, when it has one that
/// OpenMetrics can carry. Its labels: `trace_id` and `span_id` when the agent found the
/// transfer's trace (and wrote its span), then its own label (`request_id`) when the whole set
/// stays within OpenMetrics' 128 characters; without a trace, its own label alone.
void append_exemplar(std::string& out,
                     const metrics::series& s,
                     std::size_t i,
                     std::uint8_t decimals) {
    if (i >= s.exemplars.size()) {
        return;
    }
    const metrics::exemplar& e = s.exemplars[i];
    if (e.label_value.empty() || !is_label_name(e.label_name)) {
        return;
    }
    const bool traced = !all_zero(e.trace_id);
    const bool spanned = traced && !all_zero(e.span_id);
    const std::size_t ids = (traced ? 8 + 32 : 0) + (spanned ? 7 + 16 : 0);
    const bool own =
        e.label_name.size() + shown_characters(e.label_value) + ids <= max_exemplar_characters;
    if (!own && !traced) {
        return;
    }
    out += " # {";
    if (traced) {
        append_id(out, "trace_id", e.trace_id);
        if (spanned) {
            out += ',';
            append_id(out, "span_id", e.span_id);
        }
    }
    if (own) {
        if (traced) {
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
    std::vector<std::string> common;
    common.reserve(snapshots.size());
    for (const auto& s : snapshots) {
        common.push_back(render_labels(s->labels));
    }
    std::vector<std::size_t> pos(snapshots.size(), 0);
    std::vector<std::string> le;
    const metrics::family_spec* le_of = nullptr;  // whose bounds and decimals `le` shows
    metrics::openmetrics_claims claimed;          // OpenMetrics names of the families shown
    std::size_t left_out = 0;
    while (true) {
        const family_snapshot* head = nullptr;
        for (std::size_t a = 0; a < snapshots.size(); ++a) {
            const auto& families = snapshots[a]->families;
            if (pos[a] < families.size() &&
                (head == nullptr || families[pos[a]].spec.name < head->spec.name)) {
                head = &families[pos[a]];
            }
        }
        if (head == nullptr) {
            break;
        }
        const metrics::openmetrics_form form =
            format == exposition::text ? metrics::openmetrics_form::typed
                                       : claimed.claim(head->spec.name, head->spec.type);
        const bool shown = form != metrics::openmetrics_form::left_out;
        if (shown) {
            append_descriptors(out, head->spec, format, form);
        } else {
            ++left_out;
        }
        const std::string name = head->spec.name;
        const metric_type type = head->spec.type;
        for (std::size_t a = 0; a < snapshots.size(); ++a) {
            const auto& families = snapshots[a]->families;
            if (pos[a] < families.size() && families[pos[a]].spec.name == name) {
                const family_snapshot& f = families[pos[a]];
                if (shown && f.spec.type == type) {
                    if (type == metric_type::histogram &&
                        (le_of == nullptr || le_of->bounds != f.spec.bounds ||
                         le_of->decimals != f.spec.decimals)) {
                        le_of = &f.spec;
                        le.clear();
                        for (const double b : f.spec.bounds) {
                            le.push_back("le=\"" + format_bound(b, f.spec.decimals) + "\"");
                        }
                    }
                    append_family(out, f, common[a], le, format);
                }
                ++pos[a];
            }
        }
    }
    if (format == exposition::openmetrics) {
        out += "# EOF\n";
    }
    return left_out;
}

}  // namespace xtel::metrics
