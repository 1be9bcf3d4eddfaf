#!/usr/bin/env python3
"""The size rule of the code review, checked on the sources: a file or a function that long
mixes concerns, and is split by what changes together.

No file of src/, include/, tools/ or python/ (the bindings) (.hpp, .cpp, .h; those git tracks, and new ones git does
not ignore) is over MAX_FILE_LINES lines, and no function in them is over MAX_FUNCTION_LINES
lines, from its signature to its closing brace as lizard (PyPI) counts them. A file or a
function already over the limit when the rule came is listed in ALLOWED_* with its size then:
it may shrink, not grow, and each entry goes once it is split. Prints each violation on a line
and exits 1, or prints a summary and exits 0; exits 77 (skipped) after the file check when
lizard cannot be imported, so that a build configured without it says so instead of passing.

Arguments: the source directory. Run with a Python that has lizard (scripts/test installs
one under the build folder and hands it to CMake as XTEL_LIZARD_PYTHON).
"""
import os
import subprocess
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
TOPS = ('src', 'include', 'tools', 'python')
SUFFIXES = ('.hpp', '.cpp', '.h')
SKIPPED = 77

# Over the limit and not yet split, each with its size then: none is left. A file or function
# that must stay over the limit a while is listed here with its size, and may not grow.
ALLOWED_FILES = {}
# (file, function as lizard names it) -> its length then.
ALLOWED_FUNCTIONS = {}


def sources(root):
    """The files checked, relative to root: those git lists (tracked, or new and not ignored),
    or every file under TOPS outside a git checkout (a source archive)."""
    try:
        out = subprocess.run(
            ['git', '-C', root, 'ls-files', '--cached', '--others', '--exclude-standard',
             '--', *TOPS], capture_output=True, text=True, check=True).stdout
        names = out.split('\n')
    except (OSError, subprocess.CalledProcessError):
        names = []
        for top in TOPS:
            for base, _, files in os.walk(os.path.join(root, top)):
                names += [os.path.relpath(os.path.join(base, n), root) for n in files]
    # A file deleted in the work tree but not yet in the index is still listed: skip it.
    return sorted({n for n in names if n.endswith(SUFFIXES)
                   and os.path.isfile(os.path.join(root, n))})


def over(size, limit, allowed, what):
    """The problem with `what` of `size` lines, or None: past the limit, and past its allowed
    size when it has one."""
    if allowed is not None:
        if size > allowed:
            return (f'{what} is {size} lines, grown past the {allowed} it was allowed when the '
                    f'rule came: expected at most {allowed}, and at most {limit} once split')
        return None
    if size > limit:
        return f'{what} is {size} lines: expected at most {limit}'
    return None


def main(root):
    files = sources(root)
    problems = []
    texts = {}
    for rel in files:
        with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
            texts[rel] = f.read()
        lines = texts[rel].count('\n')
        p = over(lines, MAX_FILE_LINES, ALLOWED_FILES.get(rel), rel)
        if p:
            problems.append(p)
    try:
        import lizard
    except ImportError:
        for p in problems:
            print(p)
        print(f'lizard cannot be imported by {sys.executable}: function lengths not checked '
              f'(scripts/test installs it; or configure with -DXTEL_LIZARD_PYTHON=<a Python '
              f'with lizard>)')
        return 1 if problems else SKIPPED
    functions = 0
    for rel in files:
        info = lizard.analyze_file.analyze_source_code(rel, texts[rel])
        for fn in info.function_list:
            functions += 1
            p = over(fn.length, MAX_FUNCTION_LINES, ALLOWED_FUNCTIONS.get((rel, fn.name)),
                     f'{rel}:{fn.start_line}: function {fn.name}')
            if p:
                problems.append(p)
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} violations of the size rule in {len(files)} files')
        return 1
    print(f'{len(files)} files, {functions} functions: none over {MAX_FILE_LINES} and '
          f'{MAX_FUNCTION_LINES} lines, or past its allowed size')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
