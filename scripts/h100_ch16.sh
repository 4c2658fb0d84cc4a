#!/usr/bin/env bash
# Chapter 16 on one GPU (written for an H100; an H200 runs it too): the decode pairs, the sweeps, the server on one rank.
# Usage: scripts/h100_ch16.sh OUTDIR [PARTS]   PARTS: one or more (quoted) of decode serving probe sweeps server,
# or all (the default); OUTDIR defaults to $OUT. BATCHING_ARGS: extra arguments for the load sweep (batching.py).
# On the H100 the parts probe, server and sweeps (with a 50-request load sweep) fit one 10-minute call together;
# the default load sweep (200 requests, 4 loads) takes most of a call alone: give it a call of its own, or
# shorten it with BATCHING_ARGS. tp_decode is the 2-GPU script's. On the H200 at 105c17f: serving 118 s; sweeps
# (50-request load sweep) 284 s: 38 + 27 s the KV-cache sweeps, 149 s speculative, 70 s the load sweep.
# Each step has its own time limit (so a hung step still leaves the others and the archive); the script
# exits 1 if any step failed or timed out, after running the rest.
# An unknown part is refused (exit 2) before any runs.
# What comes back: OUTDIR/ch16_<part>.tar.gz (reports, JSON, figures, logs) and OUTDIR/ch16_<part>.log,
# few files at the top of OUTDIR, because a device run returns at most 8 files.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:-${OUT:?usage: scripts/h100_ch16.sh OUTDIR [PARTS]}}
part=${2:-all}
known="decode serving probe sweeps server"
parts=$part; [ "$part" = all ] && parts=$known
for p in $parts; do   # every part named is known before any runs
  [[ " $known " == *" $p "* ]] || { echo "error: unknown part $p (one or more of: $known; or all)" >&2; exit 2; }
done
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1
logs=$work/logs
. "$(dirname "$0")/steps.sh"
run_part() {
  case $1 in
    decode)  # peaks first (cached per machine); the pair took 44-77 s at 135e97c-c8b4e68 (two compiled variants)
      TAIL=40 step benchmark_ch16_decode 300 $py benchmark.py --peaks --pair decode_graph --output "$work/ch16_decode"
      # the step by kernel class per token, and each variant against an fp32 step (compiles: 20-27 s each)
      TAIL=8 step decode_profile 300 $py ch16/decode_profile.py --variants eager graph "compile (rounding like eager)" \
        "fused (pair variant)" "fused, Inductor PDL" "PDL step (pair variant)" "PDL step, PDL off" \
        "PDL step, fp8 weights (pair variant)" \
        --out "$work/ch16_decode/profile"
      cp profiles/peaks/cuda-*.json "$work/" 2>/dev/null ;;
    serving)
      TAIL=40 step benchmark_ch16_serving 570 $py benchmark.py --pair kv_cache --pair speculative --pair paged_kv \
        --pair batching --output "$work/ch16_serving" ;;
    probe)  # paged_kv taken apart: splits and key tiles of the paged kernel, the contiguous cache read by it
      TAIL=20 step paged_probe 240 $py scripts/paged_probe.py "$work/probe/paged_probe.md" ;;
    sweeps)
      gbps=$($py -c "import glob,json; print(json.load(open(sorted(glob.glob('profiles/peaks/cuda-*.json'))[-1]))['copy_gbps'])" 2>/dev/null || echo 3000)
      step kv_cache_sweep 240 $py ch16/kv_cache_sweep.py --contexts 128 512 1024 2048 4000 --copy-gbps "${gbps:-3000}" --out "$work/sweeps"
      step kv_cache_sweep_b4 120 $py ch16/kv_cache_sweep.py --contexts 512 1024 2048 --batch 4 --copy-gbps "${gbps:-3000}" --out "$work/sweeps_batch4"
      step speculative_sweep 300 $py ch16/speculative_sweep.py --scales 0 0.25 0.5 1 2 --ks 1 2 4 8 --budget 1 --out "$work/sweeps"
      # shellcheck disable=SC2086
      step batching_sweep 540 $py ch16/batching.py ${BATCHING_ARGS:-} --out "$work/sweeps" ;;
    server)  # one rank serves target and draft from one pool (the 2-GPU script runs 2 ranks)
      step server_1gpu_small 90 $py ch16/symmetric_memory_inference.py --device cuda --requests 16 \
        --out "$work/server_1gpu_small.json"
      step server_1gpu_1b 240 $py ch16/symmetric_memory_inference.py --device cuda --config llama-1b --depth 2 --prompt 64 \
        --new 32 --k 4 --requests 16 --out "$work/server_1gpu_1b.json"
      TAIL=3 step pytest_ch16_gpu 300 $py -m pytest -q tests/test_ch16.py ;;
  esac
}
tag=${part// /-}
for p in $parts; do run_part "$p"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$work/logs/gpu.csv" 2>/dev/null
tar -czf "$out/ch16_${tag}.tar.gz" -C "$work" .
cat "$work"/logs/*.log > "$out/ch16_${tag}.log" 2>/dev/null
echo "wrote $out/ch16_${tag}.tar.gz"
finish
