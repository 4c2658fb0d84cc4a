#!/usr/bin/env bash
# Issue 21 on one H100, step by step, each under its own time limit so that one call always returns its logs.
# Usage: scripts/h100_issue21.sh OUTDIR STEP...
#   imports   how long a worker's start takes (the torch import, the harness's modules)
#   peaks     the ceilings measured anew (skip it to use profiles/peaks, carried or copied in)
#   ceiling   tests/test_ceilings_gpu.py: a plain large matmul cannot beat its ceiling
#   aa        one multi-chapter A/A run (the reuse, A/A, trap and side-stream fixtures); repeat the word for more runs
#   chN       benchmark.py --chapter N at full size (ch1, ch11, ch13, ch16; CH_LIMIT_S, default 330)
#   prealloc  ch1/preallocation_profile.py: host time per op and per step, with and without the allocator's cache
#   goodput   ch1/performance_basics_optimized.py, tests 1, 2 and 2b in turn five times
#   validate  scripts/validate_harness.py: five pairs, the harness vs do_bench vs a CUDA-event loop
# An unknown step is refused (exit 2) before any runs; the script exits 1 if any step failed, after running the rest.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_issue21.sh OUTDIR STEP...}; shift
for s in "$@"; do   # every step named is known before any runs
  [[ $s =~ ^(imports|peaks|ceiling|aa|ch[0-9]+|prealloc|goodput|validate)$ ]] || {
    echo "error: unknown step $s (imports, peaks, ceiling, aa, chN, prealloc, goodput or validate)" >&2; exit 2; }
done
mkdir -p "$out/logs"; export PYTHONUNBUFFERED=1
logs=$out/logs
. "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
runs=0
for s in "$@"; do
  case $s in
    imports) TAIL=12 step imports 60 bash -c 'for m in torch common.run; do TIMEFORMAT="import $m: %R s"; time python3 -c "import $m"; done
                                        python3 -X importtime -c "import common.run" 2>&1 | sort -t"|" -k2 -n | tail -6
                                        python3 -c "import time; t=time.time(); import torch.profiler; print(f\"import torch.profiler: {time.time()-t:.1f} s\")
x = __import__(\"torch\").ones(1, device=\"cuda\"); from common.profiling.capture import count_launches
for n in (\"first\", \"second\"): t=time.time(); c=count_launches(lambda: x.add_(1)); print(f\"{n} kernel count: {time.time()-t:.1f} s\", c)"' ;;
    peaks) TAIL=12 step peaks 150 python3 benchmark.py --peaks ;;
    ceiling) TAIL=8 step ceiling 90 python3 -m pytest -q -s tests/test_ceilings_gpu.py ;;
    aa) runs=$((runs + 1)); rm -rf "$out/aa$runs"; TAIL=14 step "aa$runs" 240 python3 benchmark.py --root tests/fixtures --chapter 83 \
          --chapter 84 --chapter 85 --chapter 92 --output "$out/aa$runs" ;;
    ch[0-9]*) rm -rf "${out:?}/$s"; TAIL=40 step "$s" "${CH_LIMIT_S:-330}" python3 benchmark.py --chapter "${s#ch}" --output "$out/$s" ;;
    prealloc) TAIL=12 step prealloc 120 python3 ch1/preallocation_profile.py --json "$out/preallocation_profile.json" ;;
    goodput) TAIL=30 step goodput 100 python3 ch1/performance_basics_optimized.py --json "$out/goodput.json" ;;
    validate) TAIL=40 step validate 240 python3 scripts/validate_harness.py --out "$out/validate" ;;
  esac
done
cp -r profiles/peaks "$out/" 2>/dev/null
finish
