#!/usr/bin/env bash
# Builds examples/consumer against this source tree twice: through FetchContent, and through
# find_package on xtel's Debian packages (cpack), unpacked into a scratch root, from which the
# tools answer --version and --help too, and where the unit and the monitoring files are. Arguments: <source dir> <xtel build dir>.
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
expect "the vendored consumer runs" "$("$work/fetch/consumer" "$work/out1")" \
    "consumer: 20 events, 20480 tx bytes"

echo "--- the Debian packages, installed into a scratch root"
step "make the Debian packages (cpack)" sh -c "cd '$build' && cpack -G DEB -B '$work/debs'"
root=$work/root
for deb in "$work"/debs/libxtel-dev_*.deb "$work"/debs/xtel-tools_*.deb; do
    step "unpack $(basename "$deb")" dpkg-deb -x "$deb" "$root"
done
# Every component whose headers libxtel-dev ships has its library there too (the plugin API and
# NIXL's plug-in ABI, xtel/nixl/abi_v2.hpp, are header-only): it shipped xtel/push/ without
# xtel_push, which is xtel-exporter's alone.
for dir in "$root"/usr/include/xtel/*/; do
    component=$(basename "$dir")
    if [[ $component != plugin && $component != nixl ]]; then
        expect "libxtel-dev ships libxtel_$component.a beside xtel/$component/" \
            "$(find "$root/usr/lib" -name "libxtel_$component.a")" .
    fi
done
expect "xtel-tools ships NIXL's plug-in, libtelemetry_exporter_xtel.so" \
    "$(find "$root/usr/lib" -name libtelemetry_exporter_xtel.so)" "libtelemetry_exporter_xtel.so"
expect "libxtel-dev depends on libucx-dev" \
    "$(dpkg-deb -f "$work"/debs/libxtel-dev_*.deb Depends)" "libucx-dev"
# xtel-exporter and xtel top read files and link no UCX (tests/link_test.py): their package
# depends on the libraries they link, found by dpkg-shlibdeps, and on no UCX package.
tools_depends=$(dpkg-deb -f "$work"/debs/xtel-tools_*.deb Depends)
expect "xtel-tools depends on the libraries its programs link" "$tools_depends" "libfmt"
if grep -q -e "libucx" <<<"$tools_depends"; then
    echo "FAILED: xtel-tools depends on UCX, which its programs do not link: $tools_depends" >&2
    exit 1
fi
version=$(sed -n 's/^project(xtel VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
expect "xtel-exporter --version" "$("$root/usr/bin/xtel-exporter" --version)" \
    "xtel-exporter $version" -x
expect "xtel --version" "$("$root/usr/bin/xtel" --version)" "xtel $version" -x
expect "xtel-exporter --help" "$("$root/usr/bin/xtel-exporter" --help)" "^Usage: xtel-exporter"
require "the docs are installed" test -f "$root/usr/share/doc/xtel/docs/deployment.md"
# The node's files: the unit (naming the installed program), its account and defaults (a
# conffile), the monitoring files (promtool accepts the installed rules), the manifests.
unit=$(cat "$root/lib/systemd/system/xtel-exporter.service" \
    "$root/usr/lib/systemd/system/xtel-exporter.service" 2>/dev/null || true)
expect "the unit runs the installed program" "$unit" "^ExecStart=/usr/bin/xtel-exporter "
require "the defaults file is installed" test -f "$root/etc/default/xtel-exporter"
expect "the sysusers file is installed" "$(find "$root" -path '*/sysusers.d/xtel-exporter.conf')" .
expect "the defaults are a conffile" \
    "$(dpkg-deb -I "$work"/debs/xtel-tools_*.deb conffiles)" "/etc/default/xtel-exporter" -x
expect "postinst creates the account" "$(dpkg-deb -I "$work"/debs/xtel-tools_*.deb postinst)" \
    "systemd-sysusers xtel-exporter.conf"
require "the dashboards are installed" \
    test -f "$root/usr/share/xtel/monitoring/dashboards/xtel-node.json"
require "the manifests are installed" test -f "$root/usr/share/xtel/kubernetes/daemonset.yaml"
if command -v promtool >/dev/null; then
    step "promtool checks the installed rules" \
        promtool check rules "$root"/usr/share/xtel/monitoring/rules/*.rules.yaml
fi

echo "--- find_package, from the package"
step "configure the consumer with find_package" \
    cmake -S "$src/examples/consumer" -B "$work/installed" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DXTEL_CONSUMER_USE_FIND_PACKAGE=ON -DCMAKE_PREFIX_PATH="$root/usr"
step "build the consumer with find_package" cmake --build "$work/installed" -j "$(nproc)"
mkdir "$work/out2"
expect "the packaged consumer runs" "$("$work/installed/consumer" "$work/out2")" \
    "consumer: 20 events, 20480 tx bytes"
echo "consumer builds: ok"
