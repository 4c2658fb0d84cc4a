#!/usr/bin/env bash
# Call 7 (H200): is ch13/persistent_gemm's first variant slowed by the next pair's spare worker, which
# benchmark.py starts (imports) while a compute-bound pair is timed? The pair alone (no next pair, no spare),
# then with autotune_gemm after it (the order of call 2, which also had --profile torch), then alone again.
set -uo pipefail
W=/tmp/w7; rm -rf $W; mkdir -p $W
pack() { find $W -name '*.trace.json' -delete; find $W -type f -size +3M -delete; tar -czf $OUT/call7.tgz -C $W .; }
( sleep 225; pack ) & WATCH=$!
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
mkdir -p profiles/peaks && cp diag/cuda-nvidia-h200.json profiles/peaks/
run() { local name=$1; shift; echo "== $name $(date +%T)"
  timeout 110 python3 benchmark.py "$@" --output $W/$name > $W/$name.log 2>&1; echo "exit $?"
  grep -E "optimized_persistent_gemm|baseline  |wall" $W/$name.log | grep -v "^|"; date -u +%FT%TZ >> $W/times.txt; pack; }
run alone1 --pair persistent_gemm
run with_next --pair persistent_gemm --pair autotune_gemm
run alone2 --pair persistent_gemm
kill $WATCH 2>/dev/null; pack
