// The value parsers every configuration reader shares (xtel/core/parse.hpp).
#include "xtel/core/parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>

#include "xtel/core/ascii.hpp"
#include "xtel/core/error.hpp"

namespace xtel::parse {

namespace {

using ascii::lower;

bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

}  // namespace

void fail(std::string_view var, std::string_view value, std::string_view accepted) {
    throw config_error(
        escape_controls(fmt::format("{}='{}' is invalid: {}", var, value, accepted)));
}

std::string printable(std::string_view s, shown how, std::size_t max_bytes) {
    const std::string_view part = s.substr(0, max_bytes);
    std::string out;
    out.reserve(part.size() + 2);
    if (how == shown::quoted) {
        out += '"';
    }
    for (const char c : part) {
        const auto u = static_cast<unsigned char>(c);
        const bool control = u < 0x20 || u == 0x7f;
        if (how == shown::replaced) {
            out += control ? '?' : c;
        } else if (how == shown::quoted) {
            if (c == '"' || c == '\\') {
                out += '\\';
                out += c;
            } else if (control || u > 0x7e) {
                out += fmt::format("\\x{:02x}", u);
            } else {
                out += c;
            }
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (control) {
            out += fmt::format("\\x{:02x}", u);
        } else {
            out += c;
        }
    }
    if (how == shown::quoted) {
        out += part.size() < s.size() ? "\"..." : "\"";
    }
    return out;
}

option_arg split_option(std::string_view arg) noexcept {
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
        return {arg.substr(0, eq), arg.substr(eq + 1), true};
    }
    return {arg, {}, false};
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

std::vector<std::string_view> comma_list(std::string_view var,
                                         std::string_view value,
                                         std::string_view accepted,
                                         repeats rule) {
    std::vector<std::string_view> out;
    std::string_view rest = value;
    while (true) {
        const auto comma = rest.find(',');
        const auto item = trim(rest.substr(0, comma));
        if (item.empty()) {
            fail(var, value, accepted);
        }
        if (rule == repeats::refused && std::find(out.begin(), out.end(), item) != out.end()) {
            fail(var, value, fmt::format("{} is named twice; {}", item, accepted));
        }
        out.push_back(item);
        if (comma == std::string_view::npos) {
            return out;
        }
        rest.remove_prefix(comma + 1);
    }
}

bool boolean(std::string_view var, std::string_view value) {
    const auto v = lower(value);
    // NIXL's spellings, enable and disable included, so that a NIXL deployment's value means here
    // what it meant there.
    if (v == "y" || v == "yes" || v == "on" || v == "1" || v == "true" || v == "enable") {
        return true;
    }
    if (v == "n" || v == "no" || v == "off" || v == "0" || v == "false" || v == "disable") {
        return false;
    }
    fail(var, value,
         "expected one of y, yes, on, 1, true, enable, n, no, off, 0, false, disable (any case)");
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
    for (const auto item : comma_list(var, value, accepted, repeats::refused)) {
        if (!std::all_of(item.begin(), item.end(), is_name_char)) {
            fail(var, value, accepted);
        }
        out.emplace_back(item);
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

}  // namespace xtel::parse
