#pragma once
// The terminal `xtel top` draws on, with plain ANSI escapes (no curses): raw keys through
// termios, the alternate screen, the cursor hidden; everything given back as it was found.

#include <termios.h>

#include <cstddef>
#include <string>

#include "top_view.hpp"

namespace xtel::top {

class terminal {
  public:
    /// Takes the terminal: `out` must be one (throws error otherwise). Keys are read from `in`
    /// when it is a terminal too, one at a time and not echoed; Ctrl-C and Ctrl-Z still signal.
    terminal(int in, int out);
    ~terminal();

    terminal(const terminal&) = delete;
    terminal& operator=(const terminal&) = delete;

    /// Gives the terminal back as it was (the screen, the cursor, the modes). Idempotent.
    void release() noexcept;
    /// Takes it again after release() (the program was stopped and continued).
    void take();
    bool taken() const noexcept { return taken_; }

    /// Whether keys can be read (`in` is a terminal).
    bool has_keys() const noexcept { return keys_; }
    int key_fd() const noexcept { return in_; }
    /// The bytes typed since the last call; empty when none.
    std::string read_keys();

    /// Columns and lines now (80 by 24 when the terminal does not say).
    std::size_t width() const;
    std::size_t height() const;

    /// Draws `f` from the top left corner, the column headers bold and the sorted one in
    /// reverse video, and clears what the last frame left below it.
    void draw(const frame& f);

  private:
    void write_all(std::string_view s) noexcept;

    int in_;
    int out_;
    bool keys_ = false;
    bool taken_ = false;
    termios saved_{};
};

}  // namespace xtel::top
