#!/usr/bin/env bash
# xtel-exporter on a full node (docs/performance.md, "The node exporter and xtel-exporter"):
# AGENTS node files of SERIES series each (xtel_node_files, republished every second as agents
# flushing), the real xtel-exporter serving them on a loopback port, SCRAPES scrapes of /metrics
# with curl (plain, then gzip), and the exporter's resident memory from /proc.
#   bench/node_scale.sh BUILD_DIR [AGENTS [SERIES [SCRAPES [model|native]]]]
# BUILD_DIR holds a Release build of the targets xtel-exporter and xtel_node_files. SERIES are
# time series (sample lines of a scrape), or series of the metric model with `model` (a
# histogram one: about six and a half times as many sample lines with the default buckets), or
# with `native` the same model series with native latency histograms, scraped in the protobuf
# exposition as a Prometheus with native histograms scrapes them (sample lines are then those
# of the text form, which has no native buckets).
set -euo pipefail
build=${1:?usage: bench/node_scale.sh BUILD_DIR [AGENTS [SERIES [SCRAPES [model|native]]]]}
agents=${2:-64}
series=${3:-1000}
scrapes=${4:-11}
unit=${5:-}
exporter=$build/tools/xtel_exporter/xtel-exporter
generator=$build/bench/xtel_node_files
for b in "$exporter" "$generator"; do
    [[ -x $b ]] || { echo "node_scale.sh: $b not built" >&2; exit 2; }
done

base=/dev/shm
[[ -d $base ]] || base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/xtel-node-scale-XXXXXX")
gen_pid=
exp_pid=
cleanup() {
    [[ -n $exp_pid ]] && kill "$exp_pid" 2>/dev/null && wait "$exp_pid" 2>/dev/null
    [[ -n $gen_pid ]] && kill "$gen_pid" 2>/dev/null && wait "$gen_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

source "$(dirname "${BASH_SOURCE[0]}")/node_scale/common.sh"

"$generator" "$dir" "$agents" "$series" 1000 $unit >"$dir/.generator.out" 2>&1 &
gen_pid=$!
read -r _ files per_file payload < <(wait_for "$dir/.generator.out" '^ready ')

# The caps are raised to the node measured: 64 x 1,000 model series pass the default
# --max-series, and a file of 10,000 model series per agent the default --max-file-bytes.
"$exporter" --dir "$dir" --listen 127.0.0.1:0 --max-series 100000000 --max-file-bytes 4G \
    2>"$dir/.exporter.err" &
exp_pid=$!
url=$(wait_for "$dir/.exporter.err" 'serving http://' | sed -E 's/.*serving (http:[^ ]*).*/\1/')


accept=()
if [[ $unit == native ]]; then
    accept=(-H "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
fi
# The exporter's CPU time so far (user + system), in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$exp_pid/stat"; }
# A scrape later than 200 ms after the last refresh reads every file that changed; the exporter
# also refreshes every second by itself, so some scrapes find the files read already.
scrape() {  # extra curl arguments; prints "seconds bytes" per scrape
    local i
    for ((i = 0; i < scrapes; ++i)); do
        sleep 0.3
        curl -sS -o /dev/null "${accept[@]}" "$@" -w '%{time_total} %{size_download}\n' "$url"
    done
}
before=$(ticks)
plain=$(scrape)
cpu_ms=$(( ($(ticks) - before) * 1000 / $(getconf CLK_TCK) ))
zipped=$(scrape -H Accept-Encoding:gzip)
# Native: a Prometheus with native histograms asks for protobuf alone, so no text body is
# rendered (and held) here; the sample lines are those of the generator's text form.
if [[ $unit == native ]]; then
    lines="(not asked: protobuf only)"
else
    lines=$(curl -sS "$url" | grep -vc '^#')
fi
status=/proc/$exp_pid/status
rss_kb=$(awk '/^VmRSS:/ {print $2}' "$status")
hwm_kb=$(awk '/^VmHWM:/ {print $2}' "$status")
# The exporter's own account of its scrapes (reading the files and rendering, server side).
own=$(curl -sS "$url" | awk '/^xtel_exporter_scrape_duration_seconds_(sum|count)/ {print $2}' |
    paste -sd' ')

echo "agents: $files, ${unit:-time} series per agent: $per_file, payload bytes (all files): $payload"
echo "sample lines per scrape: $lines"
format=text
[[ $unit == native ]] && format=protobuf
echo "scrape, $format (curl time_total, median of $scrapes): $(cut -d' ' -f1 <<<"$plain" | median) s," \
    "$(cut -d' ' -f2 <<<"$plain" | median) bytes"
echo "scrape, $format + gzip (median of $scrapes): $(cut -d' ' -f1 <<<"$zipped" | median) s," \
    "$(cut -d' ' -f2 <<<"$zipped" | median) bytes"
echo "xtel-exporter CPU per $format scrape (user + system over the $scrapes scrapes, its own" \
    "refreshes included): $((cpu_ms / scrapes)) ms"
read -r sum count <<<"$own"
echo "exporter's own mean scrape duration: $(awk -v s="$sum" -v c="$count" 'BEGIN {printf "%.4f", s / c}') s over $count scrapes"
echo "xtel-exporter VmRSS: $((rss_kb / 1024)) MiB ($rss_kb kB), VmHWM: $((hwm_kb / 1024)) MiB ($hwm_kb kB)"
