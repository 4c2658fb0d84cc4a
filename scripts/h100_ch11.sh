#!/usr/bin/env bash
# The chapter 11 measurement on a GPU machine, plus the escaped-stream check.
# Usage: scripts/h100_ch11.sh OUTDIR
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_ch11.sh OUTDIR}
mkdir -p "$out/logs"
export PYTHONUNBUFFERED=1
python3 ch11/probe_concurrency.py 2>&1 | tee "$out/logs/probe_concurrency.log"
rm -rf "$out/ch11" "$out/escaped"   # a rerun replaces their reports (benchmark.py refuses to write over one)
python3 benchmark.py --chapter 11 --output "$out/ch11" 2>&1 | tee "$out/logs/benchmark_ch11.log" | grep -v '^      '
make -C ch11 run 2>&1 | tee "$out/logs/make_run.log"
python3 benchmark.py --root tests/fixtures --chapter 92 --output "$out/escaped" 2>&1 | tee "$out/logs/escaped.log" | grep -v '^      '
python3 -m pytest -q tests/test_ch11.py tests/test_trust.py 2>&1 | tee "$out/logs/pytest_gpu.log" | tail -3   # the side-stream fixtures need a GPU
