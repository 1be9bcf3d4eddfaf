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

# `expect NAME TEXT PATTERN [GREP OPTION...]`: TEXT (a program's output, captured whole first)
# must match PATTERN. Captured, not piped: under pipefail, `program | grep -q` fails whenever
# grep has its match and exits before the program has written the rest (SIGPIPE), which a help
# text longer than one stdio buffer did one time in three.
expect() {
    local name=$1 text=$2 pattern=$3
    shift 3
    if ! grep -q "$@" -e "$pattern" <<<"$text"; then
        echo "FAILED: $name: no line matches '$pattern' in:" >&2
        printf '%s\n' "$text" >&2
        exit 1
    fi
}

# `require NAME COMMAND...`: the check COMMAND must succeed, or the test fails naming it.
require() {
    local name=$1
    shift
    if ! "$@"; then
        echo "FAILED: $name: $*" >&2
        exit 1
    fi
}
