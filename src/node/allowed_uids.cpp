#include "xtel/node/allowed_uids.hpp"

#include <pwd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include "xtel/core/parse.hpp"

namespace xtel::node {

std::vector<uid_t> parse_allowed_uids(std::string_view option, std::string_view value) {
    constexpr std::string_view accepted =
        "expected uids (decimal) or account names, comma-separated (--allow-uid 1000,alice)";
    std::vector<uid_t> out;
    for (const auto item : parse::comma_list(option, value, accepted, parse::repeats::allowed)) {
        if (std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            std::uint32_t uid = 0;
            const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), uid);
            // (uid_t)-1 is what chown(2) takes for "no change", never a file's owner.
            if (ec != std::errc{} || end != item.data() + item.size() || uid == UINT32_MAX) {
                parse::fail(option, value,
                            fmt::format("{} is not a uid (0 to 4294967294); {}", item, accepted));
            }
            out.push_back(static_cast<uid_t>(uid));
            continue;
        }
        const std::string name(item);
        std::vector<char> buf(16 * 1024);
        passwd pw{};
        passwd* found = nullptr;
        const int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
        if (found == nullptr) {
            parse::fail(option, value,
                        fmt::format("{}: {}; {}", name,
                                    rc == 0 ? "no such account" : std::strerror(rc), accepted));
        }
        out.push_back(pw.pw_uid);
    }
    return out;
}

}  // namespace xtel::node
