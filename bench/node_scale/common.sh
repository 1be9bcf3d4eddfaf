# Shell functions of the node-scale scripts (bench/node_scale.sh, bench/otlp_send.sh).

# Waits (up to 60 s) for a line matching $2 in file $1, and prints it.
wait_for() {
    local i
    for ((i = 0; i < 600; ++i)); do
        if grep -m1 -E "$2" "$1" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "${0##*/}: timed out waiting for '$2' in $1" >&2
    cat "$1" >&2
    return 1
}

# The median of the numbers on stdin, one per line.
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
