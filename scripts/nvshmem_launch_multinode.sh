#!/usr/bin/env bash
# Launch an NVSHMEM program on <nodes> x <gpus_per_node> GPUs, one PE per GPU.
#
#   scripts/nvshmem_launch_multinode.sh [--dry-run] [--hostfile FILE] <nodes> <gpus_per_node> <binary> [args...]
#
# Uses nvshmrun where it is installed, else Open MPI's mpirun with NVSHMEM's MPI bootstrap
# (NVSHMEM_BOOTSTRAP=MPI). Set NVSHMEM_LAUNCHER=nvshmrun|mpirun to choose. More than one node needs a
# hostfile (--hostfile FILE or HOSTFILE=FILE), one line per node: "host slots=<gpus_per_node>" for
# mpirun, "host:<gpus_per_node>" for nvshmrun.
#
# NVLink multicast stays off in every PE (NVSHMEM_DISABLE_NVLS=1, NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1), and every NVSHMEM_*, NCCL_* and UCX_* variable of the caller's
# environment is passed on (across nodes: NVSHMEM_REMOTE_TRANSPORT=ibrc|ibgda|ucx,
# NVSHMEM_IB_ENABLE_IBGDA=1, NVSHMEM_HCA_LIST=mlx5_0:1,...). NVSHMEM's library folder (the CUDA
# toolkit's or the pip package's) goes first on LD_LIBRARY_PATH.
# --dry-run prints the command and exits.
set -euo pipefail

dry_run=0
hostfile="${HOSTFILE:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --hostfile) hostfile="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
if [[ $# -lt 3 ]]; then
  echo "usage: $0 [--dry-run] [--hostfile FILE] <nodes> <gpus_per_node> <binary> [args...]" >&2
  exit 2
fi
nodes="$1" gpus="$2" binary="$3"
shift 3
if ! [[ "$nodes" =~ ^[1-9][0-9]*$ && "$gpus" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: <nodes> and <gpus_per_node> must be positive integers, got '$nodes' and '$gpus'" >&2
  exit 2
fi
if [[ "$nodes" -gt 1 && -z "$hostfile" ]]; then
  echo "error: $nodes nodes need a hostfile (--hostfile FILE or HOSTFILE=FILE), one line per node" >&2
  exit 2
fi
if [[ -n "$hostfile" && ! -f "$hostfile" && "$dry_run" -eq 0 ]]; then
  echo "error: hostfile '$hostfile' not found" >&2
  exit 2
fi
np=$((nodes * gpus))

export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$( [[ -x "$here/.venv/bin/python" ]] && echo "$here/.venv/bin/python" || echo python3)}"
nvlib="$("$python" -c 'import nvidia.nvshmem, os; print(os.path.join(list(nvidia.nvshmem.__path__)[0], "lib"))' 2>/dev/null || true)"
if [[ -n "$nvlib" && -d "$nvlib" ]]; then
  export LD_LIBRARY_PATH="$nvlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# A variable that is unset here (LD_LIBRARY_PATH in a fresh shell without NVSHMEM's library folder) is not
# passed: "${!v+set}" tests it without tripping set -u.
passed=(NVSHMEM_DISABLE_NVLS NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST LD_LIBRARY_PATH)
while IFS='=' read -r name _; do
  [[ "$name" =~ ^(NVSHMEM_|NCCL_|UCX_) && "$name" != NVSHMEM_LAUNCHER && ! " ${passed[*]} " =~ " $name " ]] && passed+=("$name")
done < <(env)

launcher="${NVSHMEM_LAUNCHER:-$(command -v nvshmrun >/dev/null 2>&1 && echo nvshmrun || echo mpirun)}"
case "$launcher" in
  nvshmrun)
    cmd=(nvshmrun -n "$np" -ppn "$gpus")
    [[ -n "$hostfile" ]] && cmd+=(-f "$hostfile")
    for v in "${passed[@]}"; do if [[ -n "${!v+set}" ]]; then cmd+=(-genv "$v" "${!v}"); fi; done
    ;;
  mpirun)
    export NVSHMEM_BOOTSTRAP=MPI
    passed+=(NVSHMEM_BOOTSTRAP)
    cmd=(mpirun -np "$np" --map-by "ppr:$gpus:node" --bind-to none)
    [[ "$(id -u)" -eq 0 ]] && cmd+=(--allow-run-as-root)
    [[ -n "$hostfile" ]] && cmd+=(--hostfile "$hostfile")
    for v in "${passed[@]}"; do if [[ -n "${!v+set}" ]]; then cmd+=(-x "$v=${!v}"); fi; done
    ;;
  *)
    echo "error: NVSHMEM_LAUNCHER=$launcher; choose nvshmrun or mpirun" >&2
    exit 2
    ;;
esac
cmd+=("$binary" "$@")

if [[ "$dry_run" -eq 1 ]]; then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi
if ! command -v "${cmd[0]}" >/dev/null 2>&1; then
  echo "error: ${cmd[0]} not found: install Open MPI (mpirun) or NVSHMEM's nvshmrun" >&2
  exit 2
fi
exec "${cmd[@]}"
