#include "run_as.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "options.hpp"

namespace xtel::xtel_exporter {

account account_to_run_as(std::string_view name) {
    const std::string n(name);
    std::vector<char> buf(16 * 1024);
    passwd pw{};
    passwd* found = nullptr;
    const int rc = ::getpwnam_r(n.c_str(), &pw, buf.data(), buf.size(), &found);
    if (found == nullptr) {
        throw usage_error(fmt::format("--user='{}' is invalid: {}; expected the name of an account",
                                      n, rc == 0 ? "no such account" : std::strerror(rc)));
    }
    account a{n, pw.pw_uid, pw.pw_gid};
    if (::geteuid() != 0 && a.uid != ::geteuid()) {
        throw usage_error(fmt::format(
            "--user='{}' needs root: this process runs as uid {}, and only root can become "
            "another account; start it as root, or as {} without --user",
            n, ::geteuid(), n));
    }
    return a;
}

void run_as(const account& a) {
    if (::geteuid() == a.uid && ::getuid() == a.uid) {
        return;
    }
    // glibc applies each of these to every thread of the process (the HTTP server's is running).
    if (::initgroups(a.name.c_str(), a.gid) != 0) {
        throw error(fmt::format("--user {}: initgroups failed: {}", a.name, std::strerror(errno)));
    }
    if (::setgid(a.gid) != 0) {
        throw error(
            fmt::format("--user {}: setgid({}) failed: {}", a.name, a.gid, std::strerror(errno)));
    }
    if (::setuid(a.uid) != 0) {
        throw error(
            fmt::format("--user {}: setuid({}) failed: {}", a.name, a.uid, std::strerror(errno)));
    }
    const bool switched =
        ::getuid() == a.uid && ::geteuid() == a.uid && ::getgid() == a.gid && ::getegid() == a.gid;
    // setuid(0) must fail now: the saved set-user-ID is no longer root's.
    if (!switched || (a.uid != 0 && ::setuid(0) == 0)) {
        throw error(
            fmt::format("--user {}: the process could still become root; stopping", a.name));
    }
}

}  // namespace xtel::xtel_exporter
