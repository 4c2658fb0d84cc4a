#!/usr/bin/env bash
# Chapter 16 across two GPUs (written for 2 H200s joined by NVLink): the tensor-parallel decode pair
# (NCCL vs one-shot symmetric-memory all-reduce), where its step's time goes (tp_decode_breakdown.py), and the
# server (target on GPU 0, draft on GPU 1), small and llama-1b, with and without symmetric memory.
# Usage: scripts/h200x2_ch16.sh OUTDIR [pair] [breakdown] [server]   (default: all three; OUTDIR defaults to $OUT;
#        it gets ch16_h200x2.tar.gz and a log)
# NVLink multicast stays off in every process, and nothing here calls a multimem op.
# Each step has its own time limit; the script exits 1 if any step failed or timed out, after running the rest.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:-${OUT:?usage: scripts/h200x2_ch16.sh OUTDIR [pair] [breakdown] [server]}}
shift $(( $# > 0 ? 1 : 0 ))
parts=" ${*:-pair breakdown server} "
want() { [[ $parts == *" $1 "* ]]; }
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rc=0 failed=""
step() { local name=$1 limit=$2; shift 2; echo "== $name" >&2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$work/logs/$name.log" 2>&1; local r=$?
  # the display leaves out the per-sample lines and torchrun's W-prefixed warnings; the log keeps them
  grep -v -e '^      ' -e '^W[0-9]' "$work/logs/$name.log" | tail -"${TAIL:-12}"
  echo "== $name: exit $r in $((SECONDS - t0)) s" | tee -a "$work/logs/status.txt" >&2
  [ $r -eq 0 ] || { rc=1; failed="$failed $name"; }; return 0; }
trap 'exit 143' TERM
trap 'tar -czf "$out/ch16_h200x2.tar.gz" -C "$work" .; cat "$work"/logs/*.log > "$out/ch16_h200x2.log" 2>/dev/null' EXIT
nvidia-smi topo -m > "$work/logs/topo.txt" 2>&1
$py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(),
[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" > "$work/logs/versions.txt" 2>&1
want pair && TAIL=40 step benchmark_tp_decode 280 $py benchmark.py --pair tp_decode --timeout 200 --output "$work/tp_decode"
cp profiles/peaks/cuda-*.json "$work/" 2>/dev/null
want breakdown && TAIL=30 step breakdown 200 $py -m torch.distributed.run --standalone --nproc-per-node 2 \
  ch16/tp_decode_breakdown.py --profile --fused --output "$work/breakdown"
want server && for mode in "" "--allreduce dist" "--no-symmetric"; do
  tag=$(echo "${mode:-symm}" | tr -d ' -')
  # $mode unquoted on purpose: it is zero, one or two words
  step "server_small_${tag}" 60 $py -m torch.distributed.run --standalone --nproc-per-node 2 \
    ch16/symmetric_memory_inference.py --device cuda $mode --requests 8 --out "$work/server_small_${tag}.json"
done
want server && for mode in "" "--no-symmetric"; do
  tag=$(echo "${mode:-symm}" | tr -d ' -')
  step "server_1b_${tag}" 150 $py -m torch.distributed.run --standalone --nproc-per-node 2 \
    ch16/symmetric_memory_inference.py --device cuda --config llama-1b --depth 2 --prompt 64 --new 32 --k 4 \
    --requests 8 $mode --out "$work/server_1b_${tag}.json"
done
echo "wrote $out/ch16_h200x2.tar.gz"
[ $rc -eq 0 ] || echo "failed:$failed" >&2
exit $rc
