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
# The two quick wins' kernels under Nsight Compute: registers, occupancy, spills, speed of light
if command -v ncu >/dev/null; then
  ncu -k regex:solve8 -c 4 --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables ch1/bin/launch_bounds_demo_sm90 2>&1 | tee "$out/logs/ncu_launch_bounds.log"
  ncu -k regex:sgemm -c 3 --section LaunchStats --section Occupancy --section SpeedOfLight ch1/bin/smem_prefetch_demo_sm90 2>&1 | tee "$out/logs/ncu_smem_prefetch.log"
else
  echo "ncu not installed: no Nsight Compute sections for the launch_bounds and smem_prefetch samples" | tee "$out/logs/ncu_missing.log"
fi
# The CUDA-graphed loop at the original batch (32), copy included: the like-for-like figure
python3 ch1/performance_basics_optimized.py --big-batch 32 --json "$out/ch1/performance_basics_optimized_b32.json" 2>&1 | tee "$out/logs/performance_basics_optimized_b32.log"
