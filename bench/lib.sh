# Shared by bench/run.sh and bench/soak.sh (sourced, not run).
#
# Every process a script starts goes into `pids`; on exit each still alive
# gets SIGTERM and is waited for, so nothing outlives the script.
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The hard descriptor limit (a number even when it is "unlimited"): held
# connections need one descriptor each in the server and in the client, so
# callers raise the soft limit to it (`ulimit -n`, in their own shell).
descriptor_hard_limit() {
    local hard
    hard="$(ulimit -Hn)"
    if [[ "$hard" == unlimited ]]; then hard=1048576; fi
    echo "$hard"
}
