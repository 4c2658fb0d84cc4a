#!/usr/bin/env bash
# Issue 21 on one H100: the ceilings (measured anew unless profiles/peaks is carried), the plain-matmul check,
# A/A runs (the trap, A/A and reuse fixture chapters in one multi-chapter run, RUNS times), then chapter 1
# at full size with each pair's wall time. Usage: scripts/h100_issue21.sh OUTDIR [RUNS] [CH1_LIMIT_S]
set -uo pipefail
out=${1:?usage: scripts/h100_issue21.sh OUTDIR [RUNS] [CH1_LIMIT_S]}; runs=${2:-1}; ch1_limit=${3:-330}
mkdir -p "$out/logs"; export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "== $name" >&2; local t0=$SECONDS
  timeout "$limit" "$@" > "$out/logs/$name.log" 2>&1; local r=$?
  grep -v '^      ' "$out/logs/$name.log" | tail -${TAIL:-12}; echo "== $name: exit $r in $((SECONDS - t0)) s" >&2; return 0; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
TAIL=12 step peaks 150 python3 benchmark.py --peaks
TAIL=8 step ceiling_test 90 python3 -m pytest -q -s tests/test_ceilings_gpu.py
for i in $(seq 1 "$runs"); do
  TAIL=14 step aa$i 200 python3 benchmark.py --root tests/fixtures --chapter 83 --chapter 84 --chapter 85 --output "$out/aa$i"
done
TAIL=30 step ch1 "$ch1_limit" python3 benchmark.py --chapter 1 --output "$out/ch1"
cp -r profiles/peaks "$out/" 2>/dev/null
