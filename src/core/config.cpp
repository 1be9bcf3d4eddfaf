#include "xtel/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <system_error>

#include "xtel/error.hpp"

namespace xtel {

namespace {

[[noreturn]] void fail(std::string_view var, std::string_view value, std::string_view accepted) {
    throw config_error(fmt::format("{}='{}' is invalid: {}", var, value, accepted));
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
        s.remove_suffix(1);
    }
    return s;
}

bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

}  // namespace

std::optional<std::string> process_env(std::string_view name) {
    const std::string key(name);
    if (const char* v = std::getenv(key.c_str())) {
        return std::string(v);
    }
    return std::nullopt;
}

namespace parse {

bool boolean(std::string_view var, std::string_view value) {
    const auto v = lower(value);
    if (v == "y" || v == "yes" || v == "on" || v == "1" || v == "true") {
        return true;
    }
    if (v == "n" || v == "no" || v == "off" || v == "0" || v == "false") {
        return false;
    }
    fail(var, value, "expected one of y, yes, on, 1, true, n, no, off, 0, false (any case)");
}

std::uint64_t unsigned_integer(std::string_view var,
                               std::string_view value,
                               std::uint64_t min,
                               std::uint64_t max) {
    const auto accepted = fmt::format("expected a whole number from {} to {}", min, max);
    if (value.empty() || !std::isdigit(static_cast<unsigned char>(value.front()))) {
        fail(var, value, accepted);
    }
    std::uint64_t out = 0;
    const auto* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, out);
    if (ec == std::errc::result_out_of_range) {
        fail(var, value, accepted);
    }
    if (ec != std::errc{} || ptr != end || out < min || out > max) {
        fail(var, value, accepted);
    }
    return out;
}

std::vector<std::string> name_list(std::string_view var, std::string_view value) {
    constexpr std::string_view accepted =
        "expected a comma-separated list of exporter names made of letters, digits, '_' and "
        "'-' (for example buffer or buffer,prometheus)";
    std::vector<std::string> out;
    std::string_view rest = value;
    while (true) {
        const auto comma = rest.find(',');
        const auto item = trim(rest.substr(0, comma));
        if (item.empty() || !std::all_of(item.begin(), item.end(), is_name_char)) {
            fail(var, value, accepted);
        }
        std::string name(item);
        if (std::find(out.begin(), out.end(), name) != out.end()) {
            fail(var, value, fmt::format("{} is named twice; {}", name, accepted));
        }
        out.push_back(std::move(name));
        if (comma == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(comma + 1);
    }
    return out;
}

std::filesystem::path existing_directory(std::string_view var, std::string_view value) {
    if (value.empty()) {
        fail(var, value, "expected the path of an existing directory");
    }
    std::error_code ec;
    const std::filesystem::path p(value);
    if (!std::filesystem::is_directory(p, ec)) {
        fail(var, value,
             std::filesystem::exists(p, ec) ? "it exists but is not a directory"
                                            : "expected the path of an existing directory; "
                                              "it does not exist");
    }
    return p;
}

void file_name(std::string_view what, std::string_view value) {
    const bool ok =
        !value.empty() && value != "." && value != ".." && value.size() <= 255 &&
        std::all_of(value.begin(), value.end(), [](char c) { return is_name_char(c) || c == '.'; });
    if (!ok) {
        throw config_error(fmt::format(
            "{} '{}' is invalid: expected 1 to 255 letters, digits, '_', '-' or '.', and not "
            "'.' or '..' (it names a file)",
            what, value));
    }
}

}  // namespace parse

config config::from_env(const env_lookup& lookup) {
    config c;
    if (const auto v = lookup(env::enable)) {
        c.enabled = parse::boolean(env::enable, *v);
    }
    if (!c.enabled) {
        return c;
    }
    if (const auto v = lookup(env::buffer_size)) {
        c.buffer_size = parse::unsigned_integer(env::buffer_size, *v, 1, max_buffer_size);
    }
    if (const auto v = lookup(env::run_interval)) {
        c.run_interval = std::chrono::milliseconds(parse::unsigned_integer(
            env::run_interval, *v, 1, static_cast<std::uint64_t>(max_run_interval.count())));
    }
    if (const auto v = lookup(env::timing_sample)) {
        c.timing_sample = static_cast<std::uint32_t>(
            parse::unsigned_integer(env::timing_sample, *v, 1, max_timing_sample));
    }
    if (const auto v = lookup(env::exporter)) {
        c.exporters = parse::name_list(env::exporter, *v);
    } else {
        c.exporters = {default_exporter};
    }
    if (const auto v = lookup(env::plugin_dir)) {
        c.plugin_dir = parse::existing_directory(env::plugin_dir, *v);
    }
    if (const auto v = lookup(env::output_path)) {
        if (v->empty()) {
            fail(env::output_path, *v,
                 "expected a non-empty value (a directory for buffer, "
                 "host:port for prometheus)");
        }
        c.output_path = *v;
        // For the flight recorder the value is a directory, and it must exist now rather than
        // at the first flush.
        if (std::find(c.exporters.begin(), c.exporters.end(), "buffer") != c.exporters.end()) {
            parse::existing_directory(env::output_path, *v);
        }
    }
    return c;
}

std::string config::exporters_string() const {
    return fmt::format("{}", fmt::join(exporters, ","));
}

}  // namespace xtel
