// xtel top's name filter: a substring, or a shell-style glob (*, ?, [...]) over the whole name.

#include "top_view.hpp"

#include <optional>

namespace xtel::top {

namespace {

/// One character of a bracket expression at `p[i]`, `\` quoting the next; advances `i`.
char bracket_char(std::string_view p, std::size_t& i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
        ++i;
    }
    return p[i++];
}

/// Matches `c` against the bracket expression starting at `p[i]` (just after `[`). Returns
/// the index after its `]`, or nullopt when it has no `]` (then `[` is an ordinary character).
std::optional<std::size_t> match_bracket(std::string_view p, std::size_t i, char c, bool& hit) {
    const bool negate = i < p.size() && (p[i] == '!' || p[i] == '^');
    if (negate) {
        ++i;
    }
    bool found = false;
    bool first = true;
    while (i < p.size() && (first || p[i] != ']')) {
        first = false;
        const char lo = bracket_char(p, i);
        char hi = lo;
        if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
            ++i;
            hi = bracket_char(p, i);
        }
        found = found || (lo <= c && c <= hi);
    }
    if (i >= p.size()) {
        return std::nullopt;
    }
    hit = found != negate;
    return i + 1;
}

/// The whole of `name` against the whole of `p`; `*` by backtracking to the last star.
bool glob(std::string_view p, std::string_view name) {
    std::size_t pi = 0, ni = 0;
    std::optional<std::size_t> star_p, star_n;
    while (ni < name.size()) {
        bool advanced = false;
        if (pi < p.size()) {
            const char pc = p[pi];
            if (pc == '*') {
                star_p = ++pi;
                star_n = ni;
                continue;
            }
            if (pc == '?') {
                advanced = true;
                ++pi;
            } else if (pc == '[') {
                bool hit = false;
                if (const auto after = match_bracket(p, pi + 1, name[ni], hit)) {
                    advanced = hit;
                    if (hit) {
                        pi = *after;
                    }
                } else if (name[ni] == '[') {
                    advanced = true;
                    ++pi;
                }
            } else {
                const bool quoted = pc == '\\' && pi + 1 < p.size();
                if (p[pi + (quoted ? 1 : 0)] == name[ni]) {
                    advanced = true;
                    pi += quoted ? 2 : 1;
                }
            }
        }
        if (advanced) {
            ++ni;
        } else if (star_p) {
            pi = *star_p;
            ni = ++*star_n;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*') {
        ++pi;
    }
    return pi == p.size();
}

}  // namespace

bool name_matches(std::string_view pattern, std::string_view name) {
    if (pattern.find_first_of("*?[") == std::string_view::npos) {
        return name.find(pattern) != std::string_view::npos;
    }
    return glob(pattern, name);
}

}  // namespace xtel::top
