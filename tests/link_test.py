#!/usr/bin/env python3
"""The programs that do not move data need no UCX library: those that only read files,
xtel-exporter and xtel top (issue 46); the NIXL plug-in; and those that make pipelines and no
agent (make_telemetry, the registry component): README.md's minimal_pipeline and the Python
module, which engines load beside the UCX NIXL bundles (tests/python/test_package.py checks the
installed module with `needed` and `UCX` from here).

Two checks for each program, because either alone can pass by accident:

- its link line, as the build wrote it (build.ninja's LINK_LIBRARIES and the libraries its link
  step depends on, or Makefiles' link.txt), names no UCX library: none of the components it
  links (metrics, node, http, push, registry...) carries UCX in its link interface. A linker that drops
  unused libraries (--as-needed, Debian's default) would hide such an edge from the check below.
- the program's dynamic section (readelf -d) needs no UCX library.

UCX's libraries are libucp, libucs, libuct and libucm. Prints each finding on a line and exits 1,
or prints a summary and exits 0.
Arguments: the build directory, readelf, optionally --runtime-only, then NAME=PROGRAM for each
program (NAME: its CMake target).

--runtime-only: each program may need the C and C++ runtime alone (libc, libm, libstdc++,
libgcc_s, the dynamic loader): the NIXL plug-in, which NIXL loads into engines' images that may
have no other library of ours (a libfmt it cannot find fails NIXL's dlopen, and NIXL then throws
out of the agent's constructor).
"""
import glob
import os
import re
import subprocess
import sys

UCX = re.compile(r'(?:\blibuc[pstm](?:[.\-_]|$))|(?:(?<!\S)-luc[pstm]\b)')
RUNTIME = re.compile(r'^(?:libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[-\w]*)'
                     r'\.so(?:\.\d+)*$')


def ninja_link_line(build, program):
    """The libraries of `program`'s link step in build.ninja, or None when it has none."""
    path = os.path.join(build, 'build.ninja')
    if not os.path.exists(path):
        return None
    output = os.path.relpath(program, build)
    found = False
    words = []
    for line in open(path, encoding='utf-8', errors='replace'):
        if line.startswith('build '):
            if found:
                break
            head = line[len('build '):].split(':', 1)[0].split()
            found = output in head
            if found:
                # The libraries it links are the step's implicit inputs (after "|").
                words += line.split(':', 1)[1].split()
        elif found and line.strip().startswith('LINK_LIBRARIES ='):
            words += line.split('=', 1)[1].split()
    return words if found else None


def make_link_line(build, name):
    """The words of target `name`'s link.txt (Makefile generators), or None."""
    for path in glob.glob(os.path.join(build, '**', 'CMakeFiles', f'{name}.dir', 'link.txt'),
                          recursive=True):
        return open(path, encoding='utf-8', errors='replace').read().split()
    return None


def needed(readelf, program):
    out = subprocess.run([readelf, '-d', program], capture_output=True, text=True, check=True)
    return re.findall(r'\(NEEDED\).*\[([^\]]+)\]', out.stdout)


def main(build, readelf, programs, runtime_only=False):
    problems = []
    for arg in programs:
        name, program = arg.split('=', 1)
        words = ninja_link_line(build, program)
        if words is None:
            words = make_link_line(build, name)
        if words is None:
            problems.append(f'{name}: no link step for {program} in {build} (build.ninja or '
                            f'link.txt): nothing to check')
            continue
        for w in dict.fromkeys(words):  # once each, in order
            if UCX.search(os.path.basename(w)):
                problems.append(f'{name}: its link line names the UCX library {w}')
        if not os.path.exists(program):
            problems.append(f'{name}: {program} is not built')
            continue
        libs = needed(readelf, program)
        for lib in libs:
            if UCX.search(lib):
                problems.append(f'{name}: {program} needs the UCX library {lib} (readelf -d)')
            elif runtime_only and not RUNTIME.match(lib):
                problems.append(f'{name}: {program} needs {lib}, which is not part of the C '
                                f'or C++ runtime (readelf -d)')
        if not libs:
            problems.append(f'{name}: readelf -d found no NEEDED entry in {program}')
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f'{len(programs)} programs: no UCX library on their link lines or in their NEEDED '
          f'entries' + (', which name the C and C++ runtime alone' if runtime_only else ''))
    return 0


if __name__ == '__main__':
    args = sys.argv[3:]
    runtime_only = bool(args) and args[0] == '--runtime-only'
    if runtime_only:
        args = args[1:]
    if len(sys.argv) < 4 or not args:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], args, runtime_only))
