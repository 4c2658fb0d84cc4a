#!/usr/bin/env bash
# Chapter 13 on one GPU (written for an H100): the profiling walkthrough, then the pairs, each part meant to stay under
# 10 minutes (session 35 ran each command of it apart on the H100; sessions 65-66 ran each part on an H200).
# Usage: scripts/h100_ch13.sh OUTDIR [PARTS]   PARTS: one or more (quoted) of walkthrough pairs triton kernels
# compile, or all (the default); OUTDIR defaults to $OUT.
# Carried wheels (git-ignored .whl/, downloaded on a machine with a registry; the GPU machine has none):
#   torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl   (torchao 0.18 is built for torch 2.11)
#   gemlite-0.6.0.post2-py3-none-any.whl   (built here from the sdist: fp8_linear's GemLite variants)
# They install with --no-deps into /tmp/site, on PYTHONPATH; a missing wheel skips the variants that need it.
# nsys is not installed on the GPU machine: the walkthrough says so and goes on. ncu runs where it is on PATH.
# Each step has its own time limit, so a hung step still leaves the others; the script exits 1 if any step failed or
# timed out, after running the rest. The limits are generous (a part's add up to 14-21 minutes; on an H200 the parts
# took 2.5 minutes (walkthrough), 4.7 (pairs), 3.1 (triton), 2.3 (kernels) and 3.6 (compile), no step over 55% of its
# limit): give a call a watchdog that packs what is there before its own limit.
# An unknown part is refused (exit 2) before any runs.
# What comes back: OUTDIR/ch13_<parts>.tar.gz (reports, traces, memory pictures, ncu CSVs, logs) and
# OUTDIR/ch13_<parts>.log, <parts> the parts joined by "-".
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:-${OUT:?usage: scripts/h100_ch13.sh OUTDIR [PARTS]}}
part=${2:-all}
known="walkthrough pairs triton kernels compile"
parts=$part; [ "$part" = all ] && parts=$known
for p in $parts; do   # every part named is known before any runs
  [[ " $known " == *" $p "* ]] || { echo "error: unknown part $p (one or more of: $known; or all)" >&2; exit 2; }
done
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  $py -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
$py -c "import torch, importlib.util as u; print('torch', torch.__version__, 'torchao', bool(u.find_spec('torchao')), 'triton', bool(u.find_spec('triton')))" \
  2>&1 | tee "$work/logs/versions.log"
logs=$work/logs
. "$(dirname "$0")/steps.sh"
# a report's verdicts (common/verdict.py) beside it, as verdicts.md; none where the run wrote no report (its step
# failed). verdicts PART
verdicts() { local dir=$work/ch13_$1; [ -f "$dir/results.json" ] || return 0
  # shellcheck disable=SC2086
  step "verdicts_$1" 60 bash -c '"${@:2}" common/verdict.py "$1/results.json" > "$1/verdicts.md"' _ "$dir" $py; }
run_part() {
  case $1 in
    walkthrough)  # the block eager, the block compiled (fused kernels in the table), the decode step
      TAIL=40 step walkthrough_block 300 $py ch13/profile_walkthrough.py --output "$work/walkthrough_block"
      TAIL=5 step walkthrough_block_compiled 240 $py ch13/profile_walkthrough.py --compile default --skip ncu \
        --output "$work/walkthrough_block_compiled"
      TAIL=40 step walkthrough_decode 300 $py ch13/profile_walkthrough.py --step decode --ncu-launches 150 \
        --output "$work/walkthrough_decode" ;;
    pairs)  # peaks first (cached per machine); a torch.profiler trace per variant
      TAIL=40 step benchmark_ch13_pairs 480 $py benchmark.py --peaks --pair fp8_linear --pair fp8_gemm \
        --pair alignment --pair softmax --pair checkpointing --profile torch --output "$work/ch13_pairs"
      verdicts pairs
      TAIL=3 step alignment_sweep 180 $py ch13/alignment_sweep.py --out "$work/alignment_sweep"
      TAIL=20 step fp8_mlp_probe 240 $py scripts/fp8_mlp_probe.py "$work/fp8_mlp_probe.md"
      cp profiles/peaks/cuda-*.json "$work/" 2>/dev/null ;;
    triton)  # the hand-written Triton GEMMs: persistence, autotuning (and the per-shape sweep)
      TAIL=40 step benchmark_ch13_triton 360 $py benchmark.py --pair persistent_gemm --pair autotune_gemm \
        --profile torch --output "$work/ch13_triton"
      verdicts triton
      TAIL=40 step autotune_sweep 300 $py ch13/autotune_sweep.py --out "$work/autotune_sweep"
      TAIL=30 step persistent_sweep 240 $py ch13/persistent_sweep.py --out "$work/persistent_sweep"
      if command -v ncu >/dev/null; then
        TAIL=5 step benchmark_ch13_ncu 300 $py benchmark.py --pair softmax --pair persistent_gemm --quick \
          --profile ncu --output "$work/ch13_ncu"
      fi ;;
    kernels)  # the .cu pairs, the standalone sample, and the ncu metric that shows each bottleneck
      TAIL=40 step benchmark_ch13_kernels 300 $py benchmark.py --pair bank_conflicts --pair histogram --pair spills \
        --output "$work/ch13_kernels"
      TAIL=0 step make_ch13 300 make -C ch13
      grep -i "spill\|error" "$logs/make_ch13.log"
      step bottlenecks_demo 120 ch13/bin/bottlenecks_demo_sm90
      if command -v ncu >/dev/null; then  # every launch of the six kernels (validate + timing), few metrics each
        mkdir -p "$work/ch13_kernels"
        step ncu_bottlenecks 300 ncu --csv --page raw --print-units base \
          --log-file "$work/ch13_kernels/bottlenecks_ncu.csv" \
          -k regex:"transpose_smem|histogram_|mix" --launch-count 400 --metrics \
          l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,lts__t_requests_op_red.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum \
          ch13/bin/bottlenecks_demo_sm90
      fi ;;
    compile)  # the compiled pairs: max-autotune compiles for minutes (prepare_s records how long)
      TAIL=40 step benchmark_ch13_compile 540 $py benchmark.py --pair compile_block --pair compile_shapes \
        --profile torch --output "$work/ch13_compile"
      verdicts compile
      TAIL=5 step graph_memory 180 $py ch13/graph_memory.py --out "$work/graph_memory"
      TAIL=3 step pytest_ch13_gpu 300 $py -m pytest -q tests/test_ch13.py ;;
  esac
}
tag=${part// /-}
for p in $parts; do run_part "$p"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$work/logs/gpu.csv" 2>/dev/null
tar -czf "$out/ch13_${tag}.tar.gz" -C "$work" .
cat "$work"/logs/*.log > "$out/ch13_${tag}.log" 2>/dev/null
echo "wrote $out/ch13_${tag}.tar.gz"
finish
