#!/usr/bin/env bash
# Chapter 4 on two GPUs of one host (nvidia-h200-x2): everything it writes goes under $OUT.
#
#   OUT=/path scripts/h200x2_ch4.sh [all|check|pairs|sweep|training|samples]...   (default: all)
#
#   check     GPUs, topology, torch/NCCL versions, symmetric memory and NVSHMEM availability;
#             the CPU tests of chapter 4 on this machine (Gloo, as in CI)             ~1 min
#   pairs     benchmark.py --chapter 4: every pair on 2 GPUs (NCCL, symmetric memory) ~5 min
#   sweep     ch4/nvshmem_vs_nccl_benchmark.py: NCCL vs one-/two-shot, both backends  ~2 min
#   training  ch4/nvshmem_training_example.py, full size, shard groups of 2 and 1     ~1 min
#   samples   make -C ch4 nvshmem, then both NVSHMEM samples under mpirun             ~2 min
# Each part stays under the 10-minute limit of one device command; run them as separate commands
# if a machine is slow. A part that fails is recorded in $OUT/status.txt and the next one runs.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
OUT=${OUT:?set OUT to the folder for results}
cd "$(dirname "$0")/.."
mkdir -p "$OUT/logs"
# NVLink multicast off in every process started from here (and, via the launch script, under mpirun).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
parts=("$@")
[[ ${#parts[@]} -eq 0 || " ${parts[*]} " == *" all "* ]] && parts=(check pairs sweep training samples)

step() {  # step NAME TIMEOUT_S COMMAND...: run it, log it, record its exit status
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*" | tee -a "$OUT/status.txt"
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT/logs/$name.log"
  echo "   $name exit $rc" | tee -a "$OUT/status.txt"
}

for part in "${parts[@]}"; do
  case "$part" in
    check)
      step topo 60 nvidia-smi topo -m
      step versions 120 "$PY" -c "
import torch, torch.distributed._symmetric_memory as sm
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())
print('gpus', [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
print('nvshmem available (torch):', sm.is_nvshmem_available())
import nvidia.nvshmem, os; print('nvshmem package:', list(nvidia.nvshmem.__path__)[0])"
      step cpu_tests 300 "$PY" -m pytest -q tests/test_ch4_pairs.py tests/test_nvshmem_training.py \
        tests/test_ch4_benchmark.py tests/test_ch4_launch.py tests/test_ch4_cuda.py
      ;;
    pairs)
      rm -rf "$OUT/ch4-pairs"   # a rerun replaces its report (benchmark.py refuses to write over one)
      step pairs 590 "$PY" benchmark.py --chapter 4 --output "$OUT/ch4-pairs"
      ;;
    sweep)
      step sweep 590 "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 ch4/nvshmem_vs_nccl_benchmark.py \
        --output "$OUT/allreduce"
      ;;
    training)
      step training 590 "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 ch4/nvshmem_training_example.py \
        --shard-size 2 1 --json "$OUT/training.json"
      step training_quick 300 "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 \
        ch4/nvshmem_training_example.py --quick --shard-size 2 1 --json "$OUT/training_quick.json"
      ;;
    samples)
      step build 590 make -C ch4 -j8 nvshmem ARCH=sm_90 "PYTHON=$PY"
      step queue_and_pipeline 300 scripts/nvshmem_launch_multinode.sh 1 2 ch4/bin/nvshmem_pipeline_patterns_sm90
      step hierarchical_1x2 300 scripts/nvshmem_launch_multinode.sh 1 2 ch4/bin/nvshmem_multinode_example_sm90
      step hierarchical_2x1 300 scripts/nvshmem_launch_multinode.sh 1 2 ch4/bin/nvshmem_multinode_example_sm90 --pes-per-node 1
      ;;
    *)
      echo "unknown part '$part': choose all, check, pairs, sweep, training or samples" >&2
      exit 2
      ;;
  esac
done
echo "== done; exit statuses in $OUT/status.txt"
