# Sourced by the tests' shell scripts: `step NAME COMMAND...` runs one step of a test with its
# output kept in a file, and when the step fails prints which step, the command and everything it
# printed, so that a failed test says why instead of ending at its last heading.
step_log=$(mktemp)
trap 'rm -f "$step_log"' EXIT

step() {
    local name=$1
    shift
    local rc=0
    "$@" >"$step_log" 2>&1 || rc=$?
    if ((rc != 0)); then
        echo "FAILED: $name (exit $rc): $*" >&2
        cat "$step_log" >&2
        exit 1
    fi
}
