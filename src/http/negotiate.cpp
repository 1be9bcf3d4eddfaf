#include "xtel/http/negotiate.hpp"

#include <algorithm>
#include <array>

#include "http/token.hpp"

namespace xtel::http {

using metrics::exposition;

namespace {

using detail::equals_ignoring_case;
using detail::is_token;
using detail::trim_ows;

/// Takes the text up to the next `sep` that is not inside a quoted string off the front of
/// `rest` (and the separator with it).
std::string_view take_item(std::string_view& rest, char sep) noexcept {
    bool quoted = false;
    std::size_t i = 0;
    for (; i < rest.size(); ++i) {
        const char c = rest[i];
        if (quoted && c == '\\') {
            ++i;  // the escaped character, whatever it is
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == sep && !quoted) {
            break;
        }
    }
    const std::string_view item = rest.substr(0, std::min(i, rest.size()));
    rest.remove_prefix(std::min(i + 1, rest.size()));
    return item;
}

/// A weight, in thousandths (RFC 9110 12.4.2: "0", "0.5", "1.000"); -1 when malformed.
int parse_qvalue(std::string_view v) noexcept {
    if (v.empty() || v.size() > 5 || (v[0] != '0' && v[0] != '1')) {
        return -1;
    }
    int q = (v[0] - '0') * 1000;
    if (v.size() == 1) {
        return q;
    }
    if (v[1] != '.') {
        return -1;
    }
    int scale = 100;
    for (const char c : v.substr(2)) {
        if (c < '0' || c > '9') {
            return -1;
        }
        q += (c - '0') * scale;
        scale /= 10;
    }
    return q > 1000 ? -1 : q;
}

/// One element of an Accept or Accept-Encoding list: a media range or a coding, the version
/// parameter if any (quotes removed), and its weight.
struct element {
    std::string_view name;
    std::string_view version;
    bool has_version = false;
    /// Prometheus's protobuf type's parameters: which message, how delimited.
    std::string_view proto;
    bool has_proto = false;
    std::string_view encoding;
    bool has_encoding = false;
    int q = 1000;
};

/// Parses one list element; false when it is empty or malformed (then it is ignored).
bool parse_element(std::string_view text, element& e) noexcept {
    e = element{};
    e.name = trim_ows(take_item(text, ';'));
    if (e.name.empty()) {
        return false;
    }
    while (!text.empty()) {
        const std::string_view param = trim_ows(take_item(text, ';'));
        const auto eq = param.find('=');
        if (eq == std::string_view::npos) {
            return false;
        }
        const std::string_view key = trim_ows(param.substr(0, eq));
        std::string_view value = trim_ows(param.substr(eq + 1));
        if (!is_token(key)) {
            return false;
        }
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
            value = value.substr(1, value.size() - 2);
        }
        if (equals_ignoring_case(key, "q")) {
            e.q = parse_qvalue(value);
            if (e.q < 0) {
                return false;
            }
        } else if (equals_ignoring_case(key, "version")) {
            e.version = value;
            e.has_version = true;
        } else if (equals_ignoring_case(key, "proto")) {
            e.proto = value;
            e.has_proto = true;
        } else if (equals_ignoring_case(key, "encoding")) {
            e.encoding = value;
            e.has_encoding = true;
        }
    }
    return true;
}

/// A representation's media type, and the version parameters that name it.
struct media_type {
    std::string_view type;
    std::string_view subtype;
    std::array<std::string_view, 2> versions;
};

constexpr media_type text_type{"text", "plain", {"0.0.4", "0.0.4"}};
constexpr media_type openmetrics_type{"application", "openmetrics-text", {"1.0.0", "0.0.1"}};
/// Its versions are not used: the protobuf type is told by its proto and encoding parameters.
constexpr media_type protobuf_type{"application", "vnd.google.protobuf", {}};

/// The quality the client gives a representation: that of the most specific element matching
/// it, the highest of those if several are as specific.
class quality {
  public:
    void offer(int specificity, int q) noexcept {
        if (specificity > specificity_ || (specificity == specificity_ && q > q_)) {
            specificity_ = specificity;
            q_ = q;
        }
    }
    /// In thousandths; 0 when nothing matched.
    int value() const noexcept { return specificity_ < 0 ? 0 : q_; }

  private:
    int specificity_ = -1;
    int q_ = 0;
};

/// How specifically media range `e` matches `t`'s type and subtype: 2 as type/subtype, 1 as
/// type/*, 0 as */*; -1 when it does not match.
int type_specificity(const element& e, const media_type& t) noexcept {
    const auto slash = e.name.find('/');
    if (slash == std::string_view::npos) {
        return -1;
    }
    const std::string_view type = trim_ows(e.name.substr(0, slash));
    const std::string_view subtype = trim_ows(e.name.substr(slash + 1));
    if (!is_token(type) || !is_token(subtype)) {
        return -1;
    }
    if (type == "*") {
        return subtype == "*" ? 0 : -1;
    }
    if (!equals_ignoring_case(type, t.type)) {
        return -1;
    }
    if (subtype == "*") {
        return 1;
    }
    return equals_ignoring_case(subtype, t.subtype) ? 2 : -1;
}

/// How specifically media range `e` matches text type `t`: 3 with a version of it, 2 without a
/// version, 1 as type/*, 0 as */*; -1 when it does not match (another type, or another
/// version).
int specificity(const element& e, const media_type& t) noexcept {
    const int s = type_specificity(e, t);
    if (s < 2 || !e.has_version) {
        return s;
    }
    return std::find(t.versions.begin(), t.versions.end(), e.version) != t.versions.end() ? 3 : -1;
}

/// The same for the protobuf type: 3 with a parameter that names the body's (proto
/// io.prometheus.client.MetricFamily, encoding delimited) and none that names another; -1 with
/// one that names another (the text encodings older Prometheus servers asked for).
int protobuf_specificity(const element& e) noexcept {
    const int s = type_specificity(e, protobuf_type);
    if (s < 2) {
        return s;
    }
    if ((e.has_proto && e.proto != "io.prometheus.client.MetricFamily") ||
        (e.has_encoding && e.encoding != "delimited")) {
        return -1;
    }
    return e.has_proto || e.has_encoding ? 3 : 2;
}

exposition choose_format(std::span<const std::string_view> lines) noexcept {
    quality text;
    quality openmetrics;
    quality protobuf;
    for (std::string_view rest : lines) {
        while (!rest.empty()) {
            element e;
            if (!parse_element(take_item(rest, ','), e)) {
                continue;
            }
            text.offer(specificity(e, text_type), e.q);
            openmetrics.offer(specificity(e, openmetrics_type), e.q);
            protobuf.offer(protobuf_specificity(e), e.q);
        }
    }
    if (protobuf.value() > 0 && protobuf.value() > openmetrics.value() &&
        protobuf.value() > text.value()) {
        return exposition::protobuf;
    }
    return openmetrics.value() > 0 && openmetrics.value() > text.value() ? exposition::openmetrics
                                                                         : exposition::text;
}

bool choose_gzip(std::span<const std::string_view> lines) noexcept {
    quality gzip;
    for (std::string_view rest : lines) {
        while (!rest.empty()) {
            element e;
            if (!parse_element(take_item(rest, ','), e) || !is_token(e.name)) {
                continue;
            }
            if (equals_ignoring_case(e.name, "gzip") || equals_ignoring_case(e.name, "x-gzip")) {
                gzip.offer(1, e.q);
            } else if (e.name == "*") {
                gzip.offer(0, e.q);
            }
        }
    }
    return gzip.value() > 0;
}

}  // namespace

std::string_view content_type(exposition format) noexcept {
    switch (format) {
        case exposition::text:
            break;
        case exposition::openmetrics:
            return "application/openmetrics-text; version=1.0.0; charset=utf-8";
        case exposition::protobuf:
            // As Prometheus's client libraries write it; Prometheus picks its parser by the
            // media type alone.
            return "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
                   "encoding=delimited";
    }
    return "text/plain; version=0.0.4; charset=utf-8";
}

representation negotiate(std::span<const std::string_view> accept,
                         std::span<const std::string_view> accept_encoding) noexcept {
    return {choose_format(accept), choose_gzip(accept_encoding)};
}

representation negotiate(std::string_view accept, std::string_view accept_encoding) noexcept {
    return negotiate(std::span(&accept, accept.empty() ? 0 : 1),
                     std::span(&accept_encoding, accept_encoding.empty() ? 0 : 1));
}

}  // namespace xtel::http
