#include "exporters/prometheus/prometheus_text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace xtel::detail {

namespace {

using metrics::family_snapshot;
using metrics::metric_type;

/// Length of the valid UTF-8 sequence at the start of `s`, or 0.
std::size_t utf8_sequence(std::string_view s) {
    const auto b0 = static_cast<unsigned char>(s[0]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b0 < 0x80) {
        return 1;
    } else if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        cp = b0 & 0x07;
    } else {
        return 0;
    }
    if (s.size() < n) {
        return 0;
    }
    for (std::size_t i = 1; i < n; ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if ((b & 0xC0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    const bool overlong = cp < min_for_length[n];
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    return overlong || surrogate || cp > 0x10FFFF ? 0 : n;
}

/// Appends `in` escaped for the exposition format; bytes that are not UTF-8 become U+FFFD,
/// since Prometheus rejects a whole scrape over one invalid label value.
void append_escaped(std::string& out, std::string_view in, bool quote) {
    while (!in.empty()) {
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

void append_scaled(std::string& out, std::uint64_t v, std::uint8_t decimals);

/// A bucket bound, kept in units of 10^-decimals, in the unit shown: exactly, without
/// trailing zeros, for whole numbers of kept units (10 µs as seconds is 0.00001).
std::string format_bound(double b, std::uint8_t decimals) {
    if (b == std::floor(b) && b < 1e15) {
        std::string out;
        append_scaled(out, static_cast<std::uint64_t>(b), decimals);
        if (decimals > 0) {
            while (out.back() == '0') {
                out.pop_back();
            }
            if (out.back() == '.') {
                out.pop_back();
            }
        }
        return out;
    }
    return fmt::format("{}", b / std::pow(10.0, decimals));
}

void append_number(std::string& out, std::uint64_t v) {
    const fmt::format_int f(v);
    out.append(f.data(), f.size());
}

/// v / 10^decimals, exactly: 450 with 6 decimals is 0.000450.
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

/// Writes one sample line's name and labels up to the closing brace and the space after it.
/// `extra` is a last label already rendered (a histogram's `le="..."`), or empty.
void append_head(std::string& out,
                 const family_snapshot& f,
                 std::string_view suffix,
                 const std::string& common,
                 const metrics::series& s,
                 std::string_view extra) {
    out += f.spec.name;
    out += suffix;
    out += '{';
    out += common;
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
    if (!extra.empty()) {
        if (!first) {
            out += ',';
        }
        out += extra;
    }
    out += "} ";
}

void append_family(std::string& out,
                   const family_snapshot& f,
                   const std::string& common,
                   std::span<const std::string> le) {
    for (const metrics::series& s : f.series) {
        switch (f.spec.type) {
            case metric_type::counter:
            case metric_type::gauge:
                append_head(out, f, "", common, s, {});
                append_scaled(out, s.value, f.spec.decimals);
                out += '\n';
                break;
            case metric_type::histogram: {
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i < le.size() && i < s.buckets.size(); ++i) {
                    cumulative += s.buckets[i];
                    append_head(out, f, "_bucket", common, s, le[i]);
                    append_number(out, cumulative);
                    out += '\n';
                }
                append_head(out, f, "_bucket", common, s, "le=\"+Inf\"");
                append_number(out, s.count);
                out += '\n';
                [[fallthrough]];
            }
            case metric_type::summary:
                append_head(out, f, "_sum", common, s, {});
                append_scaled(out, s.sum, f.spec.decimals);
                out += '\n';
                append_head(out, f, "_count", common, s, {});
                append_number(out, s.count);
                out += '\n';
                break;
        }
    }
}

}  // namespace

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

void render(std::span<const std::shared_ptr<const metrics::snapshot>> snapshots, std::string& out) {
    std::vector<std::string> common;
    common.reserve(snapshots.size());
    for (const auto& s : snapshots) {
        common.push_back(render_labels(s->labels));
    }
    std::vector<std::size_t> pos(snapshots.size(), 0);
    std::vector<std::string> le;
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
            return;
        }
        out += "# HELP ";
        out += head->spec.name;
        out += ' ';
        append_escaped(out, head->spec.help, false);
        out += "\n# TYPE ";
        out += head->spec.name;
        out += ' ';
        out += metrics::to_string(head->spec.type);
        out += '\n';
        const std::string name = head->spec.name;
        const metric_type type = head->spec.type;
        const std::vector<double>* bounds = nullptr;
        std::uint8_t decimals = 0;
        for (std::size_t a = 0; a < snapshots.size(); ++a) {
            const auto& families = snapshots[a]->families;
            if (pos[a] < families.size() && families[pos[a]].spec.name == name) {
                const family_snapshot& f = families[pos[a]];
                if (f.spec.type == type) {
                    if (type == metric_type::histogram &&
                        (bounds == nullptr || *bounds != f.spec.bounds ||
                         decimals != f.spec.decimals)) {
                        decimals = f.spec.decimals;
                        bounds = &f.spec.bounds;
                        le.clear();
                        for (const double b : f.spec.bounds) {
                            le.push_back("le=\"" + format_bound(b, f.spec.decimals) + "\"");
                        }
                    }
                    append_family(out, f, common[a], le);
                }
                ++pos[a];
            }
        }
    }
}

}  // namespace xtel::detail
