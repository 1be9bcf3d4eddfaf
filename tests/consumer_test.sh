#!/usr/bin/env bash
# Builds examples/consumer against this source tree twice: through FetchContent, and through
# find_package on an installed copy. Arguments: <source dir> <xtel build dir>.
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "--- FetchContent"
cmake -S "$src/examples/consumer" -B "$work/fetch" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFETCHCONTENT_SOURCE_DIR_XTEL="$src" >/dev/null
cmake --build "$work/fetch" -j "$(nproc)" >/dev/null
mkdir "$work/out1"
"$work/fetch/consumer" "$work/out1" | tee "$work/fetch.log"
grep -q "consumer: 20 events, 20480 tx bytes" "$work/fetch.log"

echo "--- find_package"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/consumer" -B "$work/installed" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DXTEL_CONSUMER_USE_FIND_PACKAGE=ON -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/installed" -j "$(nproc)" >/dev/null
mkdir "$work/out2"
"$work/installed/consumer" "$work/out2" | tee "$work/installed.log"
grep -q "consumer: 20 events, 20480 tx bytes" "$work/installed.log"
echo "consumer builds: ok"
