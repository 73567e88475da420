#!/usr/bin/env bash
# Runs every fuzz target for a fixed time (default 60 s each) with corpora
# seeded from fuzz/seeds/<target> (and, for the targets that read JSON-RPC,
# the protocol's golden vectors), prints one summary line per target, and
# exits 1 if any target crashed (its input is then in fuzz/artifacts/).
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
#
# On the stable toolchain: cargo-fuzz (installed under target/cargo-fuzz if
# it is not on PATH) passes rustc only stable flags (-Cpasses=sancov-module,
# -Cllvm-args=-sanitizer-coverage-*, --cfg fuzzing) when no sanitizer is
# asked for; AddressSanitizer would need -Zsanitizer, so none is used
# (debug assertions and overflow checks stay on).
set -euo pipefail
cd "$(dirname "$0")"
root="$(cd .. && pwd)"
seconds=${1:-60}
shift || true
targets=("$@")

if ! command -v cargo-fuzz >/dev/null; then
  export PATH="$root/target/cargo-fuzz/bin:$PATH"
  if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked --root "$root/target/cargo-fuzz"
  fi
fi
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
# The targets that read JSON-RPC start from the golden vectors too.
json_targets=" envelope json_validator tool_call dispatch framing acp "

# cargo-fuzz builds each crate as one codegen unit unless told otherwise
# (faster fuzzing, slower building); FUZZ_CODEGEN_UNITS=16 trades the
# other way, for short runs such as CI's.
build_flags=(--sanitizer none)
if [ -n "${FUZZ_CODEGEN_UNITS:-}" ]; then
  build_flags+=(--codegen-units "$FUZZ_CODEGEN_UNITS")
fi
# One build of every target (a run then finds it built).
cargo fuzz build "${build_flags[@]}" >&2

failed=0
for target in "${targets[@]}"; do
  corpus="corpus/$target"
  mkdir -p "$corpus"
  if [[ "$json_targets" == *" $target "* ]]; then
    cp -n ../crates/protocol/tests/golden/*.json "$corpus/" 2>/dev/null || true
  fi
  if [ -d "seeds/$target" ]; then cp -n "seeds/$target"/* "$corpus/" 2>/dev/null || true; fi
  log="$(mktemp)"
  if cargo fuzz run "${build_flags[@]}" "$target" "$corpus" -- \
      -max_total_time="$seconds" -timeout=20 -print_final_stats=1 </dev/null >"$log" 2>&1; then
    status=ok
  else
    status="CRASH (see fuzz/artifacts/$target)"
    failed=1
    tail -n 40 "$log" >&2
  fi
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n1 | grep -Eo '[0-9]+' || echo "?")
  echo "$target: $status, $runs executions in ${seconds}s, coverage $cov"
  rm -f "$log"
done
exit "$failed"
