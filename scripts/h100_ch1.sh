#!/usr/bin/env bash
# The chapter 1 measurement on a GPU machine: report, scripts, CUDA samples, Nsight Compute sections.
# Usage: scripts/h100_ch1.sh OUTDIR   (everything lands in OUTDIR; logs in OUTDIR/logs)
# Each step has its own time limit; the script exits 1 if any step failed, after running the rest.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_ch1.sh OUTDIR}
mkdir -p "$out/logs" "$out/ch1"
export PYTHONUNBUFFERED=1
logs=$out/logs
. "$(dirname "$0")/steps.sh"
rm -rf "$out/ch1"   # a rerun into the same OUTDIR replaces its report (benchmark.py refuses to write over one)
TAIL=40 step benchmark_ch1 360 python3 benchmark.py --peaks --chapter 1 --output "$out/ch1"
cp profiles/peaks/cuda-*.json "$out/" 2>/dev/null
step performance_basics 60 python3 ch1/performance_basics.py
step performance_basics_optimized 90 python3 ch1/performance_basics_optimized.py --json "$out/ch1/performance_basics_optimized.json"
step roofline_analysis 60 python3 ch1/roofline_analysis.py --out "$out/ch1/roofline_plot.png"
step make_run 120 make -C ch1 run
# The register cap's kernels under Nsight Compute: registers, occupancy, spills, speed of light
if command -v ncu >/dev/null; then
  step ncu_launch_bounds 60 ncu -k regex:solve8 -c 4 --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables ch1/bin/launch_bounds_demo_sm90
else
  echo "ncu not installed: no Nsight Compute sections" | tee "$logs/ncu_missing.log"; rc=1 failed="$failed ncu_missing"
fi
finish
