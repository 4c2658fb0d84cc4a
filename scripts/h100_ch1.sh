#!/usr/bin/env bash
# The chapter 1 measurement on a GPU machine: report, scripts, CUDA samples.
# Usage: scripts/h100_ch1.sh OUTDIR   (everything lands in OUTDIR; logs in OUTDIR/logs)
set -uo pipefail
out=${1:?usage: scripts/h100_ch1.sh OUTDIR}
mkdir -p "$out/logs"
export PYTHONUNBUFFERED=1
python3 benchmark.py --peaks --chapter 1 --output "$out/ch1" 2>&1 | tee "$out/logs/benchmark_ch1.log" | grep -v '^      '
cp profiles/peaks/cuda-*.json "$out/"
python3 ch1/performance_basics.py 2>&1 | tee "$out/logs/performance_basics.log"
python3 ch1/performance_basics_optimized.py --json "$out/ch1/performance_basics_optimized.json" 2>&1 | tee "$out/logs/performance_basics_optimized.log"
python3 ch1/roofline_analysis.py --out "$out/ch1/roofline_plot.png" 2>&1 | tee "$out/logs/roofline_analysis.log"
make -C ch1 run 2>&1 | tee "$out/logs/make_run.log"
