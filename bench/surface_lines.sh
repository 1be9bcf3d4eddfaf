#!/bin/bash
# What one node serves (docs/performance.md, issue 29): four xfer_demo pairs (8 agents) write
# 4 MiB each with the node exporter and idle; one xtel-exporter serves their files; one scrape in
# each format. Prints the lines and # TYPE lines of each body.
#
#   bench/surface_lines.sh BUILD_DIR [VAR=VALUE...]   e.g. NIXL_TELEMETRY_METRIC_SET=both
set -euo pipefail
build=${1:?usage: bench/surface_lines.sh BUILD_DIR [VAR=VALUE...]}
shift
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/agents"
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
for r in 0 1 2 3; do
  env "$@" RANK=$r LOCAL_RANK=$r NIXL_TELEMETRY_ENABLE=y NIXL_TELEMETRY_EXPORTER=node \
    NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH="$work/agents" \
    "$build/examples/xfer_demo/xfer_demo" --name "rank$r" --op write --total 4M --linger 30 \
    >"$work/demo$r.log" 2>&1 &
done
until [ "$(grep -l 'target: verified' "$work"/demo*.log 2>/dev/null | wc -l)" = 4 ]; do sleep 0.2; done
sleep 1  # a flush after the last transfer
"$build/tools/xtel_exporter/xtel-exporter" --dir "$work/agents" --listen 127.0.0.1:19466 \
  >"$work/exporter.log" 2>&1 &
until curl -sf -o /dev/null 127.0.0.1:19466/metrics; do sleep 0.2; done
curl -s 127.0.0.1:19466/metrics >"$work/text"
curl -s -H 'Accept: application/openmetrics-text;version=1.0.0' 127.0.0.1:19466/metrics >"$work/om"
echo "text: $(wc -l <"$work/text") lines, $(grep -c '^# TYPE' "$work/text") families"
echo "openmetrics: $(wc -l <"$work/om") lines, $(grep -c '^# TYPE' "$work/om") families"
