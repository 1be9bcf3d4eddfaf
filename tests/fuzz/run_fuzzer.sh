#!/usr/bin/env bash
# Runs one libFuzzer binary for a number of seconds on a scratch copy of its seed corpus.
#   run_fuzzer.sh <fuzzer> <seed corpus dir> <seconds> [extra libFuzzer flags]
set -uo pipefail
fuzzer=$1 seeds=$2 seconds=$3
shift 3
findings=$PWD  # crash, leak and timeout inputs are copied here
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cp -r "$seeds"/. "$work/corpus/" 2>/dev/null
cd "$work"
# xtel links UCX, whose own handler of fatal signals would otherwise take a crash first, print
# its backtrace and exit, so that libFuzzer never saves the input that crashed.
export UCX_ERROR_SIGNALS=
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$@" "$work/corpus" >"$work/log" 2>&1
rc=$?
grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added|==[0-9]+==|SUMMARY)" "$work/log"
if ((rc != 0)); then
    tail -n 60 "$work/log"
    for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
        [[ -e "$f" ]] && cp "$f" "$findings/" && echo "finding: $findings/$(basename "$f")"
    done
fi
exit $rc
