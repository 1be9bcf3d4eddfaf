#include "node/flock_holders.hpp"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <string>

#include "core/owned_file.hpp"

namespace xtel::node::detail {

namespace {

/// The next field of `line` separated by spaces or tabs, removed from it; empty at the end.
std::string_view next_field(std::string_view& line) {
    constexpr std::string_view blanks = " \t";
    const auto begin = line.find_first_not_of(blanks);
    if (begin == std::string_view::npos) {
        line = {};
        return {};
    }
    line.remove_prefix(begin);
    const auto end = line.find_first_of(blanks);
    const auto field = line.substr(0, end);
    line.remove_prefix(end == std::string_view::npos ? line.size() : end);
    return field;
}

template <class T>
bool number(std::string_view text, T& out, int base = 10) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

}  // namespace

flock_holders flock_holders::read(dev_t dev, const std::filesystem::path& locks) {
    flock_holders out;
    out.dev_ = dev;
    const xtel::detail::fd_guard fd{::open(locks.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) {
        return out;
    }
    // Line by line through a small buffer: the text of a busy host's locks is never held whole.
    std::array<char, 64 * 1024> buf{};
    std::string pending;
    std::size_t total = 0;
    for (;;) {
        const ssize_t n = ::read(fd.fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return out;  // readable_ stays false
        }
        if (n == 0) {
            break;
        }
        total += static_cast<std::size_t>(n);
        pending.append(buf.data(), static_cast<std::size_t>(n));
        std::size_t start = 0;
        for (auto nl = pending.find('\n'); nl != std::string::npos;
             nl = pending.find('\n', start)) {
            out.add_line(std::string_view(pending).substr(start, nl - start));
            start = nl + 1;
        }
        pending.erase(0, start);
        if (total >= max_read_bytes) {
            out.truncated_ = true;
            break;
        }
    }
    out.readable_ = true;
    return out;
}

flock_holders flock_holders::parse(std::string_view text, dev_t dev) {
    flock_holders out;
    out.dev_ = dev;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        out.add_line(text.substr(0, nl));
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    }
    out.readable_ = true;
    return out;
}

void flock_holders::add_line(std::string_view line) {
    // "1: FLOCK  ADVISORY  WRITE 4242 00:1a:123456 0 EOF"; a waiter's line has "->" after the
    // number, and is not a holder.
    next_field(line);  // "1:"
    auto kind = next_field(line);
    if (kind == "->" || kind != "FLOCK") {
        return;
    }
    next_field(line);  // ADVISORY
    if (next_field(line) != "WRITE") {
        return;
    }
    int pid = 0;
    if (!number(next_field(line), pid) || pid <= 0) {
        return;  // 0 or -1: a holder this PID namespace cannot see
    }
    const auto where = next_field(line);
    const auto first = where.find(':');
    const auto second = first == std::string_view::npos ? first : where.find(':', first + 1);
    unsigned major_number = 0;
    unsigned minor_number = 0;
    ino_t ino = 0;
    if (second == std::string_view::npos || !number(where.substr(0, first), major_number, 16) ||
        !number(where.substr(first + 1, second - first - 1), minor_number, 16) ||
        !number(where.substr(second + 1), ino)) {
        return;
    }
    if (major_number != major(dev_) || minor_number != minor(dev_)) {
        return;
    }
    holders_.emplace(ino, static_cast<pid_t>(pid));
}

std::optional<pid_t> flock_holders::holder(ino_t ino) const {
    const auto it = holders_.find(ino);
    if (it == holders_.end()) {
        return std::nullopt;
    }
    return it->second;
}

std::optional<pid_t> innermost_pid(pid_t pid, const std::filesystem::path& proc) {
    const auto path = proc / std::to_string(pid) / "status";
    const xtel::detail::fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) {
        return std::nullopt;
    }
    // The status of a process is a few KiB; NSpid comes after the ids, well within this.
    std::array<char, 16 * 1024> buf{};
    std::size_t size = 0;
    while (size < buf.size()) {
        const ssize_t n = ::read(fd.fd, buf.data() + size, buf.size() - size);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return std::nullopt;
        }
        if (n == 0) {
            break;
        }
        size += static_cast<std::size_t>(n);
    }
    std::string_view text(buf.data(), size);
    constexpr std::string_view key = "\nNSpid:";
    const auto at = text.find(key);
    if (at == std::string_view::npos) {
        return pid;  // before Linux 4.1: no namespaces to see through
    }
    auto line = text.substr(at + key.size());
    line = line.substr(0, line.find('\n'));
    std::optional<pid_t> last;
    for (auto field = next_field(line); !field.empty(); field = next_field(line)) {
        pid_t p = 0;
        if (!number(field, p)) {
            return std::nullopt;
        }
        last = p;
    }
    return last;
}

}  // namespace xtel::node::detail
