#include "xtel/node/notice.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdlib>

#include "core/owned_file.hpp"
#include "xtel/core/ascii.hpp"
#include "xtel/core/parse.hpp"

namespace xtel::node {

namespace {

/// The lines of a version 1 notice, in order, after the magic line.
constexpr std::array<std::string_view, 5> keys = {"agent_name", "pid", "node_file", "reason",
                                                  "error"};
/// Room kept for the node file's path when the error text is long: the path says which agent's
/// file it is, so it goes first.
constexpr std::size_t max_path_bytes = 1536;

/// Whether byte `c` is written as itself: printable ASCII, the backslash aside.
bool plain(unsigned char c) {
    return c >= 0x20 && c <= 0x7e && c != '\\';
}

/// `s` escaped (`\\`, `\xHH`), at most `limit` bytes of it: an escape is never cut in two.
std::string escaped(std::string_view s, std::size_t limit) {
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        const std::size_t need = plain(c) ? 1 : c == '\\' ? 2 : 4;
        if (out.size() + need > limit) {
            break;
        }
        if (plain(c)) {
            out += ch;
        } else if (c == '\\') {
            out += "\\\\";
        } else {
            out += "\\x";
            out += ascii::hex_digits[c >> 4];
            out += ascii::hex_digits[c & 0xf];
        }
    }
    return out;
}

/// The value of line `key`, unescaped; throws for an escape format_notice would not write.
std::string unescape(std::string_view key, std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if (c != '\\') {
            if (!plain(c)) {
                throw notice_error(
                    fmt::format("line '{}': byte 0x{:02x} at {} must be escaped", key, c, i));
            }
            out += v[i];
            continue;
        }
        if (i + 1 < v.size() && v[i + 1] == '\\') {
            out += '\\';
            ++i;
            continue;
        }
        if (i + 3 < v.size() && v[i + 1] == 'x') {
            // Lower case only: one encoding per byte.
            const int hi = ascii::lower_hex_value(v[i + 2]);
            const int lo = ascii::lower_hex_value(v[i + 3]);
            if (hi >= 0 && lo >= 0) {
                const auto b = static_cast<unsigned char>(hi * 16 + lo);
                if (!plain(b) && b != '\\') {
                    out += static_cast<char>(b);
                    i += 3;
                    continue;
                }
            }
        }
        throw notice_error(
            fmt::format("line '{}': bad escape at {} (accepted: \\\\, and \\x with two lower-case "
                        "hex digits of a byte that is not printable ASCII)",
                        key, i));
    }
    return out;
}

}  // namespace

std::string_view to_string(unpublished_reason r) noexcept {
    switch (r) {
        case unpublished_reason::name_taken:
            return "name_taken";
        case unpublished_reason::path_blocked:
            return "path_blocked";
        case unpublished_reason::no_space:
            return "no_space";
        case unpublished_reason::create_failed:
            return "create_failed";
        case unpublished_reason::file_lost:
            return "file_lost";
    }
    return "create_failed";
}

std::string notice_file_name(std::string_view agent_name, std::uint32_t pid) {
    return fmt::format("{}.{}{}", agent_name, pid, notice_suffix);
}

std::string format_notice(const notice& n) {
    const std::string head = fmt::format("{} {}\n", notice_magic, notice_version);
    const std::string pid = fmt::format("{} {}\n", keys[1], n.pid);
    const std::string reason = fmt::format("{} {}\n", keys[3], escaped(n.reason, 32));
    // What is left for the three values cut to fit, once the rest and their keys are counted.
    std::size_t left = max_notice_bytes - head.size() - pid.size() - reason.size() -
                       (keys[0].size() + 2) - (keys[2].size() + 2) - (keys[4].size() + 2);
    const std::string agent = escaped(n.agent_name, left);
    left -= agent.size();
    const std::string path = escaped(n.node_file, std::min(left, max_path_bytes));
    left -= path.size();
    const std::string error = escaped(n.error, left);
    return fmt::format("{}{} {}\n{}{} {}\n{}{} {}\n", head, keys[0], agent, pid, keys[2], path,
                       reason, keys[4], error);
}

notice parse_notice(std::string_view bytes) {
    if (bytes.size() > max_notice_bytes) {
        throw notice_error(fmt::format("{} bytes, more than the {} a notice may have", bytes.size(),
                                       max_notice_bytes));
    }
    std::string_view rest = bytes;
    const auto next_line = [&](std::string_view what) {
        const auto end = rest.find('\n');
        if (end == std::string_view::npos) {
            throw notice_error(
                fmt::format("line '{}' is missing or does not end in a newline", what));
        }
        const auto l = rest.substr(0, end);
        rest.remove_prefix(end + 1);
        return l;
    };
    const auto first = next_line("magic");
    const std::string expected = fmt::format("{} {}", notice_magic, notice_version);
    if (first != expected) {
        throw notice_error(
            fmt::format("first line '{}' is not '{}'", parse::escape_controls(first), expected));
    }
    std::array<std::string_view, keys.size()> values;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto l = next_line(keys[i]);
        if (l.size() <= keys[i].size() || !l.starts_with(keys[i]) || l[keys[i].size()] != ' ') {
            throw notice_error(fmt::format("line {} '{}' is not '{} <value>'", i + 2,
                                           parse::escape_controls(l), keys[i]));
        }
        values[i] = l.substr(keys[i].size() + 1);
    }
    if (!rest.empty()) {
        throw notice_error(fmt::format("{} bytes after the last line", rest.size()));
    }
    notice n;
    n.agent_name = unescape(keys[0], values[0]);
    if (n.agent_name.empty()) {
        throw notice_error("line 'agent_name': empty");
    }
    const auto pid = values[1];
    std::uint64_t p = 0;
    const bool digits = !pid.empty() && pid.size() <= 10 && pid[0] != '0' &&
                        pid.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits) {
        for (const char c : pid) {
            p = p * 10 + static_cast<std::uint64_t>(c - '0');
        }
    }
    if (!digits || p > 2147483647) {
        throw notice_error(fmt::format("line 'pid': '{}' is not a pid (1 to 2147483647)",
                                       parse::escape_controls(pid)));
    }
    n.pid = static_cast<std::uint32_t>(p);
    n.node_file = unescape(keys[2], values[2]);
    const auto reason = values[3];
    if (reason.empty() || reason.size() > 32 ||
        reason.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string_view::npos) {
        throw notice_error(fmt::format("line 'reason': '{}' is not [a-z_]{{1,32}}",
                                       parse::escape_controls(reason)));
    }
    n.reason = std::string(reason);
    n.error = unescape(keys[4], values[4]);
    return n;
}

notice_writer::notice_writer(const std::filesystem::path& dir, const notice& n)
    : path_(dir / notice_file_name(n.agent_name, n.pid)) {
    const auto fail = [&](std::string_view what, int err) {
        throw exporter_error(fmt::format("unpublished notice {}: {}: {}", path_.string(), what,
                                         detail::errno_text(err)));
    };
    std::string temp = (dir / fmt::format(".{}.XXXXXX", path_.filename().string())).string();
    detail::fd_guard fd{::mkostemp(temp.data(), O_CLOEXEC)};
    if (fd.fd < 0) {
        fail(fmt::format("cannot create a file in {}", dir.string()), errno);
    }
    struct unlink_temp {
        const std::string& path;
        bool placed = false;
        ~unlink_temp() {
            if (!placed) {
                ::unlink(path.c_str());
            }
        }
    } guard{temp};
    const std::string record = format_notice(n);
    if (::fchmod(fd.fd, 0600) != 0) {
        fail("cannot set mode 0600", errno);
    }
    if (!detail::write_all(fd.fd, record.data(), record.size(), 0)) {
        fail("cannot write it", errno);
    }
    // Held until the agent stops: a reader counts a notice only while its lock is held, so a
    // killed agent's notice is not taken for a live one.
    if (::flock(fd.fd, LOCK_EX | LOCK_NB) != 0) {
        fail("cannot lock it", errno);
    }
    for (int attempt = 0;; ++attempt) {
        if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) == 0) {
            guard.placed = true;
            break;
        }
        const int err = errno;
        if (err != EEXIST || attempt > 0) {
            fail("cannot move it into place", err);
        }
        // A notice of a process that had this pid before and was killed: replace it if it is
        // a file of this user whose lock nobody holds.
        const detail::fd_guard old{
            ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
        struct stat st {};
        if (old.fd < 0 || ::fstat(old.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != ::geteuid() || ::flock(old.fd, LOCK_SH | LOCK_NB) != 0) {
            fail("another file is at its name; left untouched", EEXIST);
        }
        ::unlink(path_.c_str());
    }
    fd_ = fd.release();
}

notice_writer::~notice_writer() {
    // Only the file this writer made: a name replaced since is someone else's.
    struct stat mine {};
    struct stat there {};
    if (::fstat(fd_, &mine) == 0 && ::lstat(path_.c_str(), &there) == 0 &&
        mine.st_dev == there.st_dev && mine.st_ino == there.st_ino) {
        ::unlink(path_.c_str());
    }
    ::close(fd_);  // lets the lock go
}

}  // namespace xtel::node
