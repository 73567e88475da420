#!/usr/bin/env bash
# Runs every fuzz target for a fixed time (default 60 s each) with corpora
# seeded from the golden vectors, then prints one summary line per target.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

for target in "${targets[@]}"; do
  corpus="corpus/$target"
  mkdir -p "$corpus"
  # Seeds: every golden vector, plus whatever earlier runs found.
  cp -n ../crates/protocol/tests/golden/*.json "$corpus/" 2>/dev/null || true
  if [ -d "seeds/$target" ]; then cp -n "seeds/$target"/* "$corpus/" 2>/dev/null || true; fi
  log="$(mktemp)"
  if cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    status=ok
  else
    status="CRASH (see fuzz/artifacts/$target)"
  fi
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n1 | grep -Eo '[0-9]+' || echo "?")
  echo "$target: $status, $runs executions in ${seconds}s, coverage $cov"
  rm -f "$log"
done
