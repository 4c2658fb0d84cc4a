#!/usr/bin/env bash
# The chapter 11 measurement on a GPU machine, plus the escaped-stream check.
# Usage: scripts/h100_ch11.sh OUTDIR   (everything lands in OUTDIR; logs in OUTDIR/logs)
# Each step has its own time limit; the script exits 1 if any step failed, after running the rest.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_ch11.sh OUTDIR}
mkdir -p "$out/logs"
export PYTHONUNBUFFERED=1
logs=$out/logs
. "$(dirname "$0")/steps.sh"
rm -rf "$out/ch11" "$out/escaped"   # a rerun replaces their reports (benchmark.py refuses to write over one)
step probe_concurrency 120 python3 ch11/probe_concurrency.py
TAIL=40 step benchmark_ch11 300 python3 benchmark.py --chapter 11 --output "$out/ch11"
step make_run 120 make -C ch11 run
# the side-stream fixtures (GPU only): work left on a stream the caller never waits for must FAIL, so the step
# passes when benchmark.py exits 1, and the next when its report names exactly the two variants that leave it
TAIL=30 expect escaped 120 1 python3 benchmark.py --root tests/fixtures --chapter 92 --output "$out/escaped"
step escaped_caught 30 python3 scripts/expect_failures.py "$out/escaped" ch92/sidestream/optimized_sidestream_escaped \
  ch92/sidestream/optimized_sidestream_partial
TAIL=3 step pytest_gpu 300 python3 -m pytest -q tests/test_ch11.py tests/test_trust.py
finish
