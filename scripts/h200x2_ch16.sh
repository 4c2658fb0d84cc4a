#!/usr/bin/env bash
# Chapter 16 across two GPUs (written for 2 H200s joined by NVLink): the tensor-parallel decode pair
# (NCCL vs one-shot symmetric-memory all-reduce) and the server (target on GPU 0, draft on GPU 1).
# Usage: scripts/h200x2_ch16.sh OUTDIR     (OUTDIR defaults to $OUT)
# NVLink multicast stays off in every process, and nothing here calls a multimem op.
set -uo pipefail
out=${1:-${OUT:?usage: scripts/h200x2_ch16.sh OUTDIR}}
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi topo -m > "$work/logs/topo.txt" 2>&1
$py benchmark.py --peaks --pair tp_decode --output "$work/ch16_tp" 2>&1 | tee "$work/logs/benchmark_tp_decode.log" | grep -v '^      '
cp profiles/peaks/cuda-*.json "$work/" 2>/dev/null
for mode in "" "--allreduce dist" "--no-symmetric"; do
  tag=$(echo "${mode:-symm}" | tr -d ' -')
  $py -m torch.distributed.run --nproc-per-node 2 ch16/symmetric_memory_inference.py --device cuda $mode \
    --out "$work/server_2gpu_small_${tag}.json" 2>&1 | tee -a "$work/logs/server_2gpu.log" | grep -v '^W'
done
$py -m torch.distributed.run --nproc-per-node 2 ch16/symmetric_memory_inference.py --device cuda --config llama-1b \
  --depth 2 --prompt 64 --new 32 --k 4 --out "$work/server_2gpu_1b.json" 2>&1 | tee -a "$work/logs/server_2gpu.log" | grep -v '^W'
$py -m pytest -q tests/test_symmetric_memory_inference.py 2>&1 | tee "$work/logs/pytest_smi.log" | tail -3
tar -czf "$out/ch16_h200x2.tar.gz" -C "$work" .
cat "$work"/logs/*.log > "$out/ch16_h200x2.log" 2>/dev/null
echo "wrote $out/ch16_h200x2.tar.gz"
