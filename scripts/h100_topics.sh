#!/usr/bin/env bash
# Issue 26's single-GPU topics on one GPU (written for an H100): the new pairs, sweeps and CUDA samples, and
# each sample's negative control. Usage: scripts/h100_topics.sh OUTDIR [PARTS]   PARTS: one or more (quoted)
# of samples (which includes cluster, sfu and warp_spec) cluster sfu warp_spec pairs zero_copy sweeps, or all
# (the default).
# PAIRS: the pairs part's pairs (default: the five of the issue). About 9 minutes on an H100 for all (about 5.5 on an
# H200, summed over the parts' runs in sessions 65-66).
# Each step has its own time limit, so a hung step still leaves the others and the archive; exit 1 if any step
# failed (a negative control must fail: its step passes when the sample exits 1 and says MISMATCH).
# An unknown part is refused (exit 2) before any runs.
# What comes back: OUTDIR/topics_<parts>.tar.gz (reports, JSON, figures, logs) and OUTDIR/topics_<parts>.log.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:-${OUT:?usage: scripts/h100_topics.sh OUTDIR [PARTS]}}
part=${2:-all}
known="samples cluster sfu warp_spec pairs zero_copy sweeps"
parts=$part; [ "$part" = all ] && parts="samples pairs zero_copy sweeps"
for p in $parts; do   # every part named is known before any runs
  [[ " $known " == *" $p "* ]] || { echo "error: unknown part $p (one or more of: $known; or all)" >&2; exit 2; }
done
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1
logs=$work/logs
. "$(dirname "$0")/steps.sh"
# A sample's negative control: built with -DINJECT_FAULT, it must exit 1 and say MISMATCH. fault SRC [ARCH [FLAGS]]
fault() { local src=$1 arch=${2:-sm_90} flags=${3:-}
  step "$(basename "$src")_inject_fault" 150 bash -c 'nvcc -std=c++17 -O3 -arch="$3" -Icommon/cuda -DINJECT_FAULT "$1.cu" -o "$2" $4 || exit 2
    got=$("$2"); r=$?; echo "$got"; echo "sample exit $r (a negative control must exit 1 and say MISMATCH)"
    [ $r -eq 1 ] && grep -q MISMATCH <<< "$got"' _ "$src" "$work/$(basename "$src")_fault" "$arch" "$flags"; }
run_part() {
  case $1 in
    samples)
      step build 180 make -C ch1 restrict_demo divergence_demo l2_persist_demo restrict_loads
      for s in restrict_demo divergence_demo l2_persist_demo; do step "$s" 120 "ch1/bin/${s}_sm90"; done
      step restrict_ncu 150 ncu --launch-count 4 --kernel-name regex:gemv --metrics gpu__time_duration.sum,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_global_st.sum,lts__t_sectors_op_write.sum,dram__bytes_read.sum ch1/bin/restrict_demo_sm90
      step divergence_ncu 120 ncu --launch-count 2 --kernel-name "regex:divergent|grouped" --metrics gpu__time_duration.sum,smsp__thread_inst_executed_per_inst_executed.ratio,smsp__inst_executed.sum ch1/bin/divergence_demo_sm90
      step l2_ncu 180 ncu --launch-count 3 --kernel-name "regex:plain|streaming" --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed ch1/bin/l2_persist_demo_sm90
      for s in restrict_demo divergence_demo l2_persist_demo; do fault "ch1/$s"; done
      run_part cluster; run_part sfu; run_part warp_spec ;;
    cluster)
      step build_cluster 120 make -C ch1 cluster_dsmem_demo
      step cluster_dsmem_demo 120 ch1/bin/cluster_dsmem_demo_sm90
      fault ch1/cluster_dsmem_demo ;;
    sfu)
      step build_ch13 120 make -C ch13 sfu_balance_demo
      step sfu_balance_demo 120 ch13/bin/sfu_balance_demo_sm90
      step sfu_ncu 150 ncu --launch-count 3 --kernel-name regex:sum_exp2 --metrics gpu__time_duration.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active ch13/bin/sfu_balance_demo_sm90
      fault ch13/sfu_balance_demo ;;
    warp_spec)
      step build_warp_spec 180 make -C ch13 warp_specialization_demo
      step warp_specialization_demo 120 ch13/bin/warp_specialization_demo_sm90
      # the four versions' first launches (the checks; cuBLAS's kernels are named gemm too, hence the names)
      TAIL=60 step warp_spec_ncu 240 ncu --launch-count 4 --kernel-name "regex:gemm_uniform|gemm_specialized" --section SpeedOfLight --section WarpStateStats --metrics "${WS_METRICS:-gpu__time_duration.sum}" ch13/bin/warp_specialization_demo_sm90
      fault ch13/warp_specialization_demo sm_90a "$($py scripts/cuda_paths.py cublas)" ;;
    pairs)
      # shellcheck disable=SC2046
      TAIL=40 step pairs 300 $py benchmark.py $(printf -- '--pair %s ' ${PAIRS:-zero_copy zero_copy_reuse host_gather \
        grad_accumulation transposed_weight}) --output "$work/pairs" ;;
    zero_copy)
      step image_kernels 90 $py ch1/image_kernels.py
      step zero_copy_sweep 120 $py ch1/zero_copy_sweep.py --out "$work/zero_copy_sweep"
      step zero_copy_probe 90 $py scripts/zero_copy_probe.py "$work/probe/zero_copy_probe.md" ;;
    sweeps)
      step grad_accumulation_sweep 150 $py ch1/grad_accumulation_sweep.py --cap-gb 1 --out "$work/grad_accumulation_sweep"
      step transpose_sweep 150 $py ch13/transpose_sweep.py --out "$work/transpose_sweep"
      step wave_sweep 180 $py ch13/wave_sweep.py --out "$work/wave_sweep" ;;
  esac
}
tag=${part// /-}
for p in $parts; do run_part "$p"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,pcie.link.gen.max,pcie.link.width.max --format=csv > "$work/logs/gpu.csv" 2>/dev/null
tar -czf "$out/topics_${tag}.tar.gz" -C "$work" .
cat "$work"/logs/*.log > "$out/topics_${tag}.log" 2>/dev/null
finish
