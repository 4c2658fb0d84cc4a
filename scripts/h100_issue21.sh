#!/usr/bin/env bash
# Issue 21 on one H100, first call: the ceilings measured anew, the plain-matmul check, the A/A and trap
# fixtures, then chapter 1 at full size with each pair's wall time. Usage: scripts/h100_issue21.sh OUTDIR [CH1_LIMIT_S]
set -uo pipefail
out=${1:?usage: scripts/h100_issue21.sh OUTDIR}; ch1_limit=${2:-300}
mkdir -p "$out/logs"; export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "== $name" >&2; local t0=$SECONDS
  timeout "$limit" "$@" > "$out/logs/$name.log" 2>&1; local r=$?
  grep -v '^      ' "$out/logs/$name.log" | tail -${TAIL:-12}; echo "== $name: exit $r in $((SECONDS - t0)) s" >&2; return 0; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
step peaks 150 python3 benchmark.py --peaks
TAIL=8 step ceiling_test 90 python3 -m pytest -q -s tests/test_ceilings_gpu.py
step fixtures 200 python3 benchmark.py --root tests/fixtures --chapter 84 --chapter 85 --chapter 83 --chapter 92 --output "$out/fixtures"
TAIL=40 step ch1 "$ch1_limit" python3 benchmark.py --chapter 1 --output "$out/ch1"
cp -r profiles/peaks "$out/" 2>/dev/null
