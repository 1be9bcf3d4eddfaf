#!/usr/bin/env bash
# Usage: systemd_sandbox_test.sh same-uid|several-uids REPO EXPORTER XFER_DEMO
# Runs the built xtel-exporter as deploy/systemd/xtel-exporter.service would, where no systemd
# is there to start it (a container): its options from xtel-exporter.default (--dir and
# --listen pointed at a test directory and a free port), in a mount namespace where /dev/shm is
# read-only and /tmp private (ReadOnlyPaths=, PrivateTmp=), under setpriv with no new
# privileges and the unit's capability bounding set, beside real xfer_demo agents publishing
# node files into a directory under /dev/shm; and checks that /metrics serves every agent and
# refuses none.
#   same-uid      the unit as shipped: agents and exporter of one unprivileged uid (User=),
#                 no capability at all
#   several-uids  with several-uids.conf: agents of two uids, the exporter root with only
#                 CAP_DAC_READ_SEARCH, --allow-uid naming both
# Needs root (setpriv, unshare, mount); exit status 77 (skipped) otherwise.
set -euo pipefail
mode=$1 repo=$2 exporter=$3 demo=$4
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null || ! command -v unshare >/dev/null ||
    ! command -v curl >/dev/null || ! unshare --mount true 2>/dev/null; then
    echo "skipped: needs root, setpriv, unshare (util-linux), curl and mount namespaces"
    exit 77
fi
case $mode in
    same-uid) agent_uids=(4711) exporter_uid=4711 want_capeff=0000000000000000 ;;
    several-uids) agent_uids=(4712 4713) exporter_uid=0 want_capeff=0000000000000004 ;;
    *) echo "systemd_sandbox_test.sh: '$mode' is not a mode: expected same-uid or several-uids" >&2; exit 64 ;;
esac

dir=$(mktemp -d /dev/shm/xtel-deploy-test.XXXXXX)
# The exporter's own directory, bound here inside the sandbox: a build under /tmp (a CI clone)
# would otherwise vanish under the private /tmp.
bindir=$(mktemp -d /dev/shm/xtel-deploy-bin.XXXXXX)
chmod 0755 "$bindir"
log=$(mktemp)
pids=()
declare -A demo_pid
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir" "$log"
    rmdir "$bindir" 2>/dev/null || true
}
trap cleanup EXIT
if [[ $mode == same-uid ]]; then
    chown "${agent_uids[0]}:${agent_uids[0]}" "$dir"
    chmod 0700 "$dir"
else
    chmod 1777 "$dir"   # two agents' users create files in it; the exporter only reads
fi

# The agents: one xfer_demo (two agents) per uid, lingering so their files stay live.
for uid in "${agent_uids[@]}"; do
    setpriv --reuid "$uid" --regid "$uid" --clear-groups \
        env NIXL_TELEMETRY_ENABLE=y NIXL_TELEMETRY_EXPORTER=node \
        NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH="$dir" NIXL_TELEMETRY_RUN_INTERVAL=50 \
        UCX_TLS=tcp,self UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no \
        "$demo" --name "deploy-$uid" --total 1M --linger 60 >/dev/null 2>&1 &
    pids+=($!)
    demo_pid[$uid]=$!
done
want_agents=$((2 * ${#agent_uids[@]}))

# The unit's options, as systemd would pass them: XTEL_EXPORTER_OPTS from the defaults file,
# then this test's directory and port (a later option wins).
opts=$(set -a && source "$repo/deploy/systemd/xtel-exporter.default" && echo "$XTEL_EXPORTER_OPTS")
extra=(--dir "$dir" --listen 127.0.0.1:0)
if [[ $mode == several-uids ]]; then
    extra+=(--allow-uid "$(IFS=,; echo "${agent_uids[*]}")")
    privs=(--bounding-set -all,+dac_read_search --inh-caps -all,+dac_read_search
           --ambient-caps +dac_read_search)
else
    privs=(--reuid "$exporter_uid" --regid "$exporter_uid" --clear-groups
           --bounding-set -all --inh-caps -all)
fi
# shellcheck disable=SC2086  # the options are split at spaces, as systemd splits $VAR
unshare --mount --propagation private -- bash -c '
    mount --bind /dev/shm /dev/shm && mount -o remount,bind,ro /dev/shm &&
    mount --bind "$1" "$2" && shift 2 &&
    mount -t tmpfs -o mode=1777 tmpfs /tmp && exec "$@"' sandbox \
    "$(dirname "$exporter")" "$bindir" \
    setpriv --no-new-privs "${privs[@]}" "$bindir/$(basename "$exporter")" $opts "${extra[@]}" \
    2>"$log" &
exporter_pid=$!
pids+=("$exporter_pid")

port=""
for _ in $(seq 100); do
    port=$(sed -n 's|.*serving http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$log")
    [[ -n $port ]] && break
    sleep 0.1
done
if [[ -z $port ]]; then
    echo "xtel-exporter did not start:" >&2; cat "$log" >&2; exit 1
fi

# Each initiator wrote its 1 MiB (setpriv and env exec the demo: its pid is the one started).
written() { # written UID: the line of the bytes deploy-UID-initiator wrote, as served
    printf 'xtel_transfer_bytes_total{agent_name="deploy-%s-initiator",pid="%s",%s} 1048576' \
        "$1" "${demo_pid[$1]}" 'backend="ucx",operation="write",direction="tx",local_memory="dram",remote_memory="dram",remote_agent="deploy-'"$1"'-target",status="success",gpu="unknown"'
}
metrics=""
for _ in $(seq 100); do
    metrics=$(curl -sf "http://127.0.0.1:$port/metrics" || true)
    done_all=1
    for uid in "${agent_uids[@]}"; do
        grep -qxF "$(written "$uid")" <<<"$metrics" || done_all=0
    done
    ((done_all)) && break
    sleep 0.2
done
fail=0
check() { # check DESCRIPTION COMMAND...: runs COMMAND, reports DESCRIPTION when it fails
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; fail=1; fi
}
check "xtel_exporter_agents is $want_agents" grep -qx "xtel_exporter_agents $want_agents" <<<"$metrics"
for reason in foreign_owner unreadable writer_mismatch writer_unverified not_regular; do
    check "no file refused as $reason" \
        grep -qx "xtel_exporter_files_refused_total{kind=\"node_file\",reason=\"$reason\"} 0" <<<"$metrics"
done
for uid in "${agent_uids[@]}"; do
    check "deploy-$uid-initiator's 1 MiB written is served with its pid" grep -qxF "$(written "$uid")" <<<"$metrics"
done
status=$(cat "/proc/$exporter_pid/status")
check "the exporter runs as uid $exporter_uid" \
    grep -qE "^Uid:\s+$exporter_uid\s+$exporter_uid\s+$exporter_uid\s+$exporter_uid$" <<<"$status"
check "its effective capabilities are $want_capeff" grep -qx "CapEff:	$want_capeff" <<<"$status"
check "it cannot gain privileges (NoNewPrivs)" grep -qx "NoNewPrivs:	1" <<<"$status"
check "its /dev/shm is read-only" \
    grep -qE "^[0-9]+ [0-9]+ [0-9:]+ \S+ /dev/shm ro," "/proc/$exporter_pid/mountinfo"
if ((fail)); then
    echo "--- xtel-exporter's log" >&2; cat "$log" >&2
    echo "--- /metrics (xtel_exporter_ and xtel_transfer_bytes lines)" >&2
    grep -E "^(xtel_exporter_agents|xtel_exporter_snapshot|xtel_transfer_bytes)" <<<"$metrics" >&2 || true
    exit 1
fi
