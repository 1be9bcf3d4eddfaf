#!/usr/bin/env bash
# Usage: systemd_unit_test.sh verify|security|broken REPO EXPORTER [DROP-IN]
# Checks deploy/systemd/xtel-exporter.service (with DROP-IN from deploy/systemd when given) on
# a copy whose ExecStart names EXPORTER, the built program: systemd-analyze verify needs the
# binary to exist.
#   verify    systemd-analyze verify passes with nothing to say (an unknown directive is only
#             a warning there: any output fails the test)
#   security  systemd-analyze security --offline rates its exposure 2.0 or lower
#   broken    the same check on a copy with a misspelt directive fails, naming it (so that
#             verify can fail)
set -euo pipefail
mode=$1 repo=$2 exporter=$3 dropin=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unit=$work/xtel-exporter.service
sed "s|^ExecStart=/usr/bin/xtel-exporter |ExecStart=$exporter |" \
    "$repo/deploy/systemd/xtel-exporter.service" >"$unit"
grep -q "^ExecStart=$exporter " "$unit" || { echo "no ExecStart=/usr/bin/xtel-exporter line to replace" >&2; exit 1; }
if [[ -n $dropin ]]; then
    mkdir "$unit.d"
    cp "$repo/deploy/systemd/$dropin" "$unit.d/"
fi
if [[ $mode == broken ]]; then
    sed -i 's/^ProtectHome=/ProtectHomme=/' "$unit"
    mode=verify
fi
cd "$work"
case $mode in
    verify)
        out=$(systemd-analyze verify "$unit" 2>&1) && rc=0 || rc=$?
        if ((rc != 0)) || [[ -n $out ]]; then
            printf 'systemd-analyze verify: exit status %d\n%s\n' "$rc" "$out" >&2
            exit 1
        fi
        echo "systemd-analyze verify: clean" ;;
    security)
        out=$(systemd-analyze security --offline=yes --threshold=20 "$unit" 2>&1) && rc=0 || rc=$?
        echo "$out" | grep "Overall exposure level"
        if ((rc != 0)); then
            echo "$out" | grep '✗' >&2 || true
            echo "exposure above 2.0 (exit status $rc)" >&2
            exit 1
        fi ;;
    *)
        echo "systemd_unit_test.sh: '$mode' is not a mode: expected verify, security or broken" >&2
        exit 64 ;;
esac
