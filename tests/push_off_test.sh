#!/usr/bin/env bash
# Usage: tests/push_off_test.sh XTEL_EXPORTER
# In a build without the push clients (XTEL_PUSH=OFF), xtel-exporter refuses each push flag,
# whatever its value, with one line naming the build and exit status 64: a mistyped
# --otlp-interval or --otlp-header would otherwise be taken and never used.
set -u
exporter=$1
failed=0
check() {
    local out rc
    # A build that took the flag would serve: the timeout ends it, and the check fails.
    out=$(timeout 10 "$exporter" --dir . --listen 127.0.0.1:0 "$@" 2>&1)
    rc=$?
    if [[ $rc != 64 || $out != *"is not in this build of xtel-exporter"* ||
        $(wc -l <<<"$out") != 1 ]]; then
        echo "FAILED: xtel-exporter $* gave status $rc and: $out" >&2
        failed=1
    fi
}
check --otlp-interval abc
check --otlp-interval 0
check --otlp-interval 60
check --otlp-header NAME=VALUE
check --otlp-protocol http/json
check --otlp-temporality delta
check --otlp-compression gzip
check --otlp-endpoint http://127.0.0.1:4318
check --remote-write http://127.0.0.1:9090/api/v1/write
# What the build has still works: --help, and a flag it knows with a bad value says so.
if ! "$exporter" --help >/dev/null; then
    echo "FAILED: xtel-exporter --help" >&2
    failed=1
fi
out=$(timeout 10 "$exporter" --dir . --stale-ttl abc 2>&1)
if [[ $? != 64 || $out != *"--stale-ttl"* ]]; then
    echo "FAILED: --stale-ttl abc: $out" >&2
    failed=1
fi
exit $failed
