#!/usr/bin/env bash
# Builds examples/consumer against this source tree twice: through FetchContent, and through
# find_package on an installed copy. Arguments: <source dir> <xtel build dir>.
set -euo pipefail
src=$1
build=$2
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
work=$(mktemp -d)
trap 'rm -rf "$work" "$step_log"' EXIT

echo "--- FetchContent"
step "configure the consumer with FetchContent" \
    cmake -S "$src/examples/consumer" -B "$work/fetch" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFETCHCONTENT_SOURCE_DIR_XTEL="$src"
# The configure line says whether CUDA is used, and how.
grep -E "xtel: CUDA support (ON \(.*loaded when first used|OFF)" "$step_log"
step "build the consumer with FetchContent" cmake --build "$work/fetch" -j "$(nproc)"
# A vendored build that made no choice about CUDA starts on a host without its runtime.
if readelf -d "$work/fetch/consumer" | grep -i "NEEDED.*cudart"; then
    echo "FAILED: the vendored consumer needs the CUDA runtime to start" >&2
    exit 1
fi
mkdir "$work/out1"
"$work/fetch/consumer" "$work/out1" | tee "$work/fetch.log"
grep -q "consumer: 20 events, 20480 tx bytes" "$work/fetch.log"

echo "--- find_package"
step "install xtel from $build" cmake --install "$build" --prefix "$work/prefix"
step "configure the consumer with find_package" \
    cmake -S "$src/examples/consumer" -B "$work/installed" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DXTEL_CONSUMER_USE_FIND_PACKAGE=ON -DCMAKE_PREFIX_PATH="$work/prefix"
step "build the consumer with find_package" cmake --build "$work/installed" -j "$(nproc)"
mkdir "$work/out2"
"$work/installed/consumer" "$work/out2" | tee "$work/installed.log"
grep -q "consumer: 20 events, 20480 tx bytes" "$work/installed.log"
echo "consumer builds: ok"
