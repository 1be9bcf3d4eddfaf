#include "terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "xtel/core/error.hpp"

namespace xtel::top {

namespace {

// The alternate screen (the shell's screen comes back as it was), cursor hidden, cleared.
constexpr std::string_view enter = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
// Attributes off, cursor shown, the shell's screen back.
constexpr std::string_view leave = "\x1b[0m\x1b[?25h\x1b[?1049l";
constexpr std::string_view bold = "\x1b[1m";
constexpr std::string_view reverse = "\x1b[7m";
constexpr std::string_view normal = "\x1b[0m";
constexpr std::string_view clear_line = "\x1b[K";
constexpr std::string_view clear_below = "\x1b[J";

winsize size_of(int fd) {
    winsize ws{};
    if (::ioctl(fd, TIOCGWINSZ, &ws) != 0) {
        ws = {};
    }
    return ws;
}

}  // namespace

terminal::terminal(int in, int out) : in_(in), out_(out) {
    if (::isatty(out_) == 0) {
        throw error(
            "standard output is not a terminal: --once prints one frame without one (for "
            "scripts and pipes)");
    }
    keys_ = ::isatty(in_) != 0 && ::tcgetattr(in_, &saved_) == 0;
    take();
}

terminal::~terminal() {
    release();
}

void terminal::take() {
    if (taken_) {
        return;
    }
    if (keys_) {
        termios raw = saved_;
        // Keys one at a time, not echoed; ISIG stays, so Ctrl-C and Ctrl-Z still signal (the
        // program restores the terminal on both).
        raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        ::tcsetattr(in_, TCSANOW, &raw);
    }
    write_all(enter);
    taken_ = true;
}

void terminal::release() noexcept {
    if (!taken_) {
        return;
    }
    write_all(leave);
    if (keys_) {
        ::tcsetattr(in_, TCSADRAIN, &saved_);
    }
    taken_ = false;
}

std::string terminal::read_keys() {
    std::string keys;
    if (!keys_) {
        return keys;
    }
    char buf[256];
    for (;;) {
        const auto n = ::read(in_, buf, sizeof buf);
        if (n > 0) {
            keys.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return keys;
    }
}

std::size_t terminal::width() const {
    const auto ws = size_of(out_);
    return ws.ws_col > 0 ? ws.ws_col : 80;
}

std::size_t terminal::height() const {
    const auto ws = size_of(out_);
    return ws.ws_row > 0 ? ws.ws_row : 24;
}

void terminal::draw(const frame& f) {
    const std::size_t w = width();
    std::string out = "\x1b[H";
    for (std::size_t i = 0; i < f.lines.size(); ++i) {
        const std::string& line = f.lines[i];
        if (i == f.header_line && f.sort_begin < f.sort_end && f.sort_end <= line.size()) {
            out += bold;
            out.append(line, 0, f.sort_begin);
            out += reverse;
            out.append(line, f.sort_begin, f.sort_end - f.sort_begin);
            out += normal;
            out += bold;
            out.append(line, f.sort_end);
            out += normal;
        } else {
            out += line;
        }
        // A line as wide as the screen leaves the cursor on its last column: erasing from
        // there would erase that character.
        if (line.size() < w) {
            out += clear_line;
        }
        if (i + 1 < f.lines.size()) {
            out += "\r\n";
        }
    }
    // What an earlier, longer frame left below, from the next line down (for the same reason).
    if (f.lines.size() < height()) {
        out += "\r\n";
        out += clear_below;
    }
    write_all(out);
}

void terminal::write_all(std::string_view s) noexcept {
    while (!s.empty()) {
        const auto n = ::write(out_, s.data(), s.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        s.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace xtel::top
