#include "xtel/push/otlp_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "http/token.hpp"
#include "xtel/core/ascii.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/push/otlp_environment.hpp"
#include "xtel/push/otlp_traces.hpp"
#include "xtel/push/push_url.hpp"

namespace xtel::push {

namespace {

/// A setting's value and the name to blame for it (a variable or a flag).
struct setting {
    std::string value;
    std::string source;
};

/// The first of `vars` that is set and not empty (the specification treats an empty value as
/// unset).
std::optional<setting> first_set(const env_lookup& env,
                                 std::initializer_list<std::string_view> vars) {
    for (const std::string_view var : vars) {
        if (auto v = env(var); v && !parse::trim(*v).empty()) {
            return setting{std::string(parse::trim(*v)), std::string(var)};
        }
    }
    return std::nullopt;
}

using ascii::lower;

/// `s` with %XX sequences decoded; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        if (i + 2 >= s.size()) {
            return std::nullopt;
        }
        const int hi = ascii::hex_value(s[i + 1]);
        const int lo = ascii::hex_value(s[i + 2]);
        if (hi < 0 || lo < 0) {
            return std::nullopt;
        }
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

/// An HTTP header name is a token (RFC 9110).
using http::detail::is_token;

/// A header value may not end the header early: no CR, LF or NUL.
bool is_header_value(std::string_view s) {
    return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

/// `s`'s URL, with the signal's path (`/v1/metrics`, `/v1/traces`) appended when asked.
std::string url_of(const setting& s, bool append_path, std::string_view path = "/v1/metrics") {
    // A host must follow the scheme: "http://" alone would become "http:/v1/metrics".
    check_push_url(s.source, s.value, "http://collector:4318");
    if (!append_path) {
        return s.value;
    }
    // The signal's path goes at the end of the URL's path, before a query or fragment.
    const auto tail_at = s.value.find_first_of("?#");
    std::string base = s.value.substr(0, tail_at);
    while (base.ends_with('/')) {
        base.pop_back();
    }
    return base + std::string(path) + (tail_at == std::string::npos ? "" : s.value.substr(tail_at));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> key_value_list(std::string_view var,
                                                                std::string_view value) {
    constexpr std::string_view accepted =
        "expected key=value pairs separated by commas, values percent-encoded";
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string_view item :
         parse::comma_list(var, value, accepted, parse::repeats::allowed)) {
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) {
            parse::fail(var, value, fmt::format("{}; '{}' has no '='", accepted, item));
        }
        const std::string_view key = parse::trim(item.substr(0, eq));
        const auto decoded = percent_decode(parse::trim(item.substr(eq + 1)));
        if (key.empty() || !decoded) {
            parse::fail(var, value,
                        fmt::format("{}; '{}' has {}", accepted, item,
                                    key.empty() ? "an empty key" : "a bad %-escape"));
        }
        std::erase_if(out, [&](const auto& kv) { return kv.first == key; });
        out.emplace_back(std::string(key), *decoded);
    }
    return out;
}

namespace {

/// The flag's value when given, else the first of `vars` set.
std::optional<setting> flag_or_env(const env_lookup& env,
                                   const std::optional<std::string>& flag,
                                   std::string_view flag_name,
                                   std::initializer_list<std::string_view> vars) {
    if (flag) {
        return setting{*flag, std::string(flag_name)};
    }
    return first_set(env, vars);
}

/// The URL POSTed to; nullopt when no endpoint is set.
std::optional<std::string> url_from(const env_lookup& env, const otlp_flags& flags) {
    if (flags.endpoint) {
        return url_of({*flags.endpoint, "--otlp-endpoint"}, true);
    }
    if (const auto m = first_set(env, {otel_env::metrics_endpoint})) {
        return url_of(*m, false);
    }
    if (const auto g = first_set(env, {otel_env::endpoint})) {
        return url_of(*g, true);
    }
    return std::nullopt;
}

/// The encoding `p` names; throws config_error for any other value.
otlp_encoding encoding_of(const setting& p) {
    if (p.value == "http/protobuf") {
        return otlp_encoding::protobuf;
    }
    if (p.value == "http/json") {
        return otlp_encoding::json;
    }
    parse::fail(p.source, p.value,
                p.value == "grpc" ? "expected http/protobuf or http/json (grpc is not supported: "
                                    "collectors take OTLP/HTTP on port 4318)"
                                  : "expected http/protobuf or http/json");
}

/// Whether `c` asks for gzip; throws config_error for a value other than gzip or none.
bool gzip_of(const setting& c) {
    if (c.value != "gzip" && c.value != "none") {
        parse::fail(c.source, c.value, "expected gzip or none");
    }
    return c.value == "gzip";
}

void read_protocol(const env_lookup& env, const otlp_flags& flags, otlp_options& o) {
    const auto p = flag_or_env(env, flags.protocol, "--otlp-protocol",
                               {otel_env::metrics_protocol, otel_env::protocol});
    if (p) {
        o.encoding = encoding_of(*p);
    }
}

void read_temporality(const env_lookup& env, const otlp_flags& flags, otlp_options& o) {
    const auto t = flag_or_env(env, flags.temporality, "--otlp-temporality",
                               {otel_env::temporality_preference});
    if (!t) {
        return;
    }
    const std::string v = lower(t->value);
    if (v == "cumulative") {
        o.temporality = otlp_temporality::cumulative;
    } else if (v == "delta" || v == "lowmemory") {
        // Every counter and histogram xtel serves is of a synchronous instrument, which
        // both preferences send as delta.
        o.temporality = otlp_temporality::delta;
    } else {
        parse::fail(t->source, t->value, "expected cumulative, delta or lowmemory");
    }
}

void read_compression(const env_lookup& env, const otlp_flags& flags, otlp_options& o) {
    const auto c = flag_or_env(env, flags.compression, "--otlp-compression",
                               {otel_env::metrics_compression, otel_env::compression});
    if (c) {
        o.gzip = gzip_of(*c);
    }
}

/// The request timeout and the export interval.
void read_times(const env_lookup& env, const otlp_flags& flags, otlp_options& o) {
    if (const auto t = first_set(env, {otel_env::metrics_timeout, otel_env::timeout})) {
        o.timeout =
            std::chrono::milliseconds(parse::unsigned_integer(t->source, t->value, 1, 600'000));
    }
    if (flags.interval_s) {
        o.interval = std::chrono::seconds(
            parse::unsigned_integer("--otlp-interval", *flags.interval_s, 1, 3600));
    } else if (const auto i = first_set(env, {otel_env::export_interval})) {
        o.interval =
            std::chrono::milliseconds(parse::unsigned_integer(i->source, i->value, 100, 3'600'000));
    }
}

// The message names the part at fault; parse::fail shows its control bytes escaped.
void check_header(std::string_view source,
                  std::string_view whole,
                  const std::string& name,
                  const std::string& value) {
    if (!is_token(name)) {
        parse::fail(source, whole,
                    fmt::format("the header name '{}' is not one: expected letters, digits "
                                "and !#$%&'*+-.^_`|~",
                                name));
    }
    if (!is_header_value(value)) {
        parse::fail(source, whole,
                    fmt::format("the value of header '{}' ('{}') holds CR, LF or NUL: expected "
                                "a value without line breaks",
                                name, value));
    }
}

/// The headers `h` lists, each checked.
std::vector<std::pair<std::string, std::string>> headers_of(const setting& h) {
    auto out = key_value_list(h.source, h.value);
    for (const auto& [name, value] : out) {
        check_header(h.source, h.value, name, value);
    }
    return out;
}

/// The variables' headers, then the flags', each replacing one of the same name.
void read_headers(const env_lookup& env, const otlp_flags& flags, otlp_options& o) {
    if (const auto h = first_set(env, {otel_env::metrics_headers, otel_env::headers})) {
        o.headers = headers_of(*h);
    }
    for (const std::string& flag : flags.headers) {
        const auto eq = flag.find('=');
        if (eq == std::string::npos) {
            parse::fail("--otlp-header", flag, "expected NAME=VALUE");
        }
        const std::string name = flag.substr(0, eq);
        const std::string value = flag.substr(eq + 1);
        check_header("--otlp-header", flag, name, value);
        std::erase_if(o.headers, [&](const auto& kv) { return lower(kv.first) == lower(name); });
        o.headers.emplace_back(name, value);
    }
}

/// host.name, service.name and the other attributes of every resource.
void read_resource(const env_lookup& env, std::string host_name, otlp_resource& r) {
    r.host_name = std::move(host_name);
    std::optional<std::string> service_from_attributes;
    if (const auto a = first_set(env, {otel_env::resource_attributes})) {
        for (auto& [key, value] : key_value_list(a->source, a->value)) {
            if (key == "service.name") {
                service_from_attributes = value;
            } else if (key == "host.name") {
                r.host_name = value;
            } else {
                r.attributes.push_back(metrics::label{key, value});
            }
        }
    }
    if (const auto s = first_set(env, {otel_env::service_name})) {
        r.service_name = s->value;
    } else if (service_from_attributes) {
        r.service_name = *service_from_attributes;
    }
}

}  // namespace

std::optional<otlp_trace_options> otlp_trace_options_from(const env_lookup& env,
                                                          std::string host_name) {
    if (const auto e = first_set(env, {otel_env::traces_exporter})) {
        const std::string v = lower(e->value);
        if (v == "none") {
            return std::nullopt;
        }
        if (v != "otlp") {
            parse::fail(e->source, e->value, "expected otlp or none");
        }
    }
    otlp_trace_options o;
    if (const auto t = first_set(env, {otel_env::traces_endpoint})) {
        o.url = url_of(*t, false);
    } else if (const auto g = first_set(env, {otel_env::endpoint})) {
        o.url = url_of(*g, true, "/v1/traces");
    } else {
        return std::nullopt;
    }
    if (const auto p = first_set(env, {otel_env::traces_protocol, otel_env::protocol})) {
        o.encoding = encoding_of(*p);
    }
    if (const auto c = first_set(env, {otel_env::traces_compression, otel_env::compression})) {
        o.gzip = gzip_of(*c);
    }
    if (const auto t = first_set(env, {otel_env::traces_timeout, otel_env::timeout})) {
        o.timeout =
            std::chrono::milliseconds(parse::unsigned_integer(t->source, t->value, 1, 600'000));
    }
    if (const auto h = first_set(env, {otel_env::traces_headers, otel_env::headers})) {
        o.headers = headers_of(*h);
    }
    read_resource(env, std::move(host_name), o.resource);
    return o;
}

std::optional<otlp_options> otlp_options_from(const env_lookup& env,
                                              const otlp_flags& flags,
                                              std::string host_name) {
    const auto exporter = first_set(env, {otel_env::metrics_exporter});
    const bool off = exporter && lower(exporter->value) == "none" && !flags.endpoint;
    std::optional<std::string> url = off ? std::nullopt : url_from(env, flags);
    // The flags are checked with OTLP off too: one given is meant for it, and a malformed one
    // (--otlp-interval abc) would otherwise pass until an endpoint is added. The variables are
    // not: with OTLP off they may be set for other programs of the environment.
    const env_lookup no_variables = [](std::string_view) { return std::optional<std::string>(); };
    const env_lookup& settings = url ? env : no_variables;
    otlp_options o;
    read_protocol(settings, flags, o);
    read_temporality(settings, flags, o);
    read_compression(settings, flags, o);
    read_times(settings, flags, o);
    read_headers(settings, flags, o);
    if (!url) {
        return std::nullopt;
    }
    o.url = std::move(*url);
    read_resource(env, std::move(host_name), o.resource);
    return o;
}

}  // namespace xtel::push
