#!/usr/bin/env bash
# Configures xtel the way most people first try, `cmake -S . -B build` with CMake's default
# generator (Unix Makefiles, not the Ninja the scripts use), and builds the targets that only
# a generator which creates output folders itself used to build: the protobuf messages.
# Argument: <source dir>.
set -euo pipefail
src=$1
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
work=$(mktemp -d)
trap 'rm -rf "$work" "$step_log"' EXIT
unset CMAKE_GENERATOR
step "configure with the default generator" \
    cmake -S "$src" -B "$work/build" -DXTEL_BUILD_TESTS=OFF -DXTEL_BUILD_BENCH=OFF
grep -q '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles$' "$work/build/CMakeCache.txt" ||
    { echo "the default generator here is not Unix Makefiles" >&2; exit 1; }
step "build the protobuf messages with Unix Makefiles" \
    cmake --build "$work/build" -j "$(nproc)" --target xtel_push_proto
echo "default generator builds: ok"
