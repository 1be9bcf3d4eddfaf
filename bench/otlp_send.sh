#!/usr/bin/env bash
# What pushing OTLP costs xtel-exporter on a full node (docs/performance.md, "OTLP"): AGENTS
# node files of SERIES time series each (xtel_node_files, republished every second), the real
# xtel-exporter pushing them every second for SECONDS to a local sink that only counts
# (bench/node_scale/otlp_sink.py), and the exporter's CPU time from /proc, against the same
# exporter serving the same files without OTLP for as long (the baseline: its directory rescans
# and refreshes). Once per protocol and compression.
#   bench/otlp_send.sh BUILD_DIR [AGENTS [SERIES [SECONDS]]]
# BUILD_DIR holds a Release build of the targets xtel-exporter and xtel_node_files.
set -euo pipefail
build=${1:?usage: bench/otlp_send.sh BUILD_DIR [AGENTS [SERIES [SECONDS]]]}
agents=${2:-64}
series=${3:-1000}
seconds=${4:-20}
exporter=$build/tools/xtel_exporter/xtel-exporter
generator=$build/bench/xtel_node_files
here=$(dirname "${BASH_SOURCE[0]}")
for b in "$exporter" "$generator"; do
    [[ -x $b ]] || { echo "otlp_send.sh: $b not built" >&2; exit 2; }
done
source "$here/node_scale/common.sh"

base=/dev/shm
[[ -d $base ]] || base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/xtel-otlp-send-XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$dir"
}
trap cleanup EXIT

"$generator" "$dir" "$agents" "$series" 1000 >"$dir/.generator.out" 2>&1 &
pids+=($!)
read -r _ files per_file payload < <(wait_for "$dir/.generator.out" '^ready ')
python3 "$here/node_scale/otlp_sink.py" >"$dir/.sink.out" 2>&1 &
pids+=($!)
sink=http://127.0.0.1:$(wait_for "$dir/.sink.out" '^listening on ' | cut -d' ' -f3)
ticks=$(getconf CLK_TCK)

# Runs the exporter with arguments $@ for $seconds and prints "cpu_seconds requests bytes" (the
# exporter's user + system time, and what the sink got meanwhile).
run() {
    local before after cpu
    before=$(curl -sS "$sink/count")
    "$exporter" --dir "$dir" --listen 127.0.0.1:0 "$@" 2>"$dir/.exporter.err" &
    local pid=$!
    wait_for "$dir/.exporter.err" 'serving http://' >/dev/null
    sleep "$seconds"
    cpu=$(awk -v t="$ticks" '{printf "%.3f", ($14 + $15) / t}' "/proc/$pid/stat")
    kill "$pid" && wait "$pid" 2>/dev/null || true
    after=$(curl -sS "$sink/count")
    read -r r0 b0 <<<"$before"
    read -r r1 b1 <<<"$after"
    echo "$cpu $((r1 - r0)) $((b1 - b0))"
}

echo "agents: $files, time series per agent: $per_file, ${seconds} s per run, one push a second"
read -r base_cpu _ _ <<<"$(run)"
echo "without OTLP: ${base_cpu} s CPU"
for protocol in http/protobuf http/json; do
    for compression in none gzip; do
        read -r cpu requests bytes <<<"$(run --otlp-endpoint "$sink" --otlp-interval 1 \
            --otlp-protocol "$protocol" --otlp-compression "$compression")"
        awk -v p="$protocol" -v c="$compression" -v cpu="$cpu" -v base="$base_cpu" \
            -v n="$requests" -v b="$bytes" 'BEGIN {
                printf "%s %s: %.3f s CPU, %d exports: %.1f ms CPU and %.0f bytes per export\n",
                    p, c, cpu, n, n ? 1000 * (cpu - base) / n : 0, n ? b / n : 0 }'
    done
done
