#pragma once
/// The URL a push goes to (remote write, OTLP), checked once when xtel-exporter starts: libcurl
/// refuses a malformed URL at every try ("URL using bad/illegal format"), which would otherwise
/// be retried for as long as the program runs.

#include <string_view>

namespace xtel::push {

/// Throws config_error (parse::fail: "<source>='<url>' is invalid: ...", one line) unless `url`
/// is an http:// or https:// URL (in lower case) with a host, a port of 1 to 65535
/// when it names one, and no space or control byte anywhere. `example` is shown as a URL that
/// would be accepted.
void check_push_url(std::string_view source, std::string_view url, std::string_view example);

}  // namespace xtel::push
