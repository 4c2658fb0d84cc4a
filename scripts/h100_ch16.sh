#!/usr/bin/env bash
# Chapter 16 on one GPU (written for an H100; an H200 runs it too): the decode pairs, the sweeps, the server on one rank.
# Usage: scripts/h100_ch16.sh OUTDIR [decode|serving|sweeps|server|all]   (default all; OUTDIR defaults to $OUT)
# Each part is meant to fit one 10-minute command (unmeasured: the first GPU session finds out); tp_decode is
# the 2-GPU script's.
# What comes back: OUTDIR/ch16_<part>.tar.gz (reports, JSON, figures, logs) and OUTDIR/ch16_<part>.log,
# few files at the top of OUTDIR, because a device run returns at most 8 files.
set -uo pipefail
out=${1:-${OUT:?usage: scripts/h100_ch16.sh OUTDIR [decode|serving|sweeps|server|all]}}
part=${2:-all}
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1
run_part() {
  case $1 in
    decode)  # peaks first (cached per machine); three variants compile for a minute or more each
      $py benchmark.py --peaks --pair decode_graph --output "$work/ch16_decode" \
        2>&1 | tee "$work/logs/benchmark_ch16_decode.log" | grep -v '^      '
      cp profiles/peaks/cuda-*.json "$work/" 2>/dev/null ;;
    serving)
      $py benchmark.py --pair kv_cache --pair speculative --pair paged_kv --pair batching --output "$work/ch16_serving" \
        2>&1 | tee "$work/logs/benchmark_ch16_serving.log" | grep -v '^      ' ;;
    sweeps)
      gbps=$($py -c "import glob,json; print(json.load(open(sorted(glob.glob('profiles/peaks/cuda-*.json'))[-1]))['copy_gbps'])" 2>/dev/null || echo 3000)
      $py ch16/kv_cache_sweep.py --contexts 128 512 1024 2048 4000 --copy-gbps "$gbps" --out "$work/sweeps" 2>&1 | tee "$work/logs/kv_cache_sweep.log"
      $py ch16/kv_cache_sweep.py --contexts 512 1024 2048 --batch 4 --copy-gbps "$gbps" --out "$work/sweeps_batch4" 2>&1 | tee "$work/logs/kv_cache_sweep_b4.log"
      $py ch16/speculative_sweep.py --scales 0 0.25 0.5 1 2 --ks 1 2 4 8 --reps 5 --out "$work/sweeps" 2>&1 | tee "$work/logs/speculative_sweep.log"
      $py ch16/batching.py --out "$work/sweeps" 2>&1 | tee "$work/logs/batching_sweep.log" ;;
    server)  # one rank serves target and draft from one pool (the 2-GPU script runs 2 ranks)
      $py ch16/symmetric_memory_inference.py --device cuda --out "$work/server_1gpu_small.json" 2>&1 | tee "$work/logs/server_1gpu.log"
      $py ch16/symmetric_memory_inference.py --device cuda --config llama-1b --depth 2 --prompt 64 --new 32 --k 4 \
        --out "$work/server_1gpu_1b.json" 2>&1 | tee -a "$work/logs/server_1gpu.log"
      $py -m pytest -q tests/test_ch16.py 2>&1 | tee "$work/logs/pytest_ch16_gpu.log" | tail -3 ;;
  esac
}
if [ "$part" = all ]; then parts="decode serving sweeps server"; else parts=$part; fi
for p in $parts; do run_part "$p"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$work/logs/gpu.csv" 2>/dev/null
tar -czf "$out/ch16_${part}.tar.gz" -C "$work" .
cat "$work"/logs/*.log > "$out/ch16_${part}.log" 2>/dev/null
echo "wrote $out/ch16_${part}.tar.gz"
