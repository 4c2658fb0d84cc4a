#!/usr/bin/env bash
# Profile a CUDA binary: Nsight Systems when installed, else Nsight Compute.
#   common/profiling/profile_cuda.sh BINARY NAME [ARGS...]
# Writes profiles/profile-NAME-<time>/ (an .nsys-rep, or an .ncu-rep plus a text summary).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BINARY NAME [ARGS...]" >&2; exit 2; }
bin=$1; name=$2; shift 2
[ -x "$bin" ] || { echo "error: $bin is not an executable (build it first, e.g. make -C ch1)" >&2; exit 2; }
out="$root/profiles/profile-$name-$(date +%Y%m%d-%H%M%S)"
if command -v nsys >/dev/null; then
  mkdir -p "$out"; echo "profiling with nsys -> $out"
  nsys profile -t cuda,nvtx -o "$out/$name" --force-overwrite=true "$bin" "$@"
elif command -v ncu >/dev/null; then
  mkdir -p "$out"; echo "nsys not installed: profiling with ncu (first 50 kernels) -> $out"
  ncu --launch-count 50 -o "$out/$name" --force-overwrite "$bin" "$@"
  ncu --import "$out/$name.ncu-rep" --print-summary per-kernel > "$out/$name-summary.txt"
else
  echo "error: neither nsys nor ncu is on PATH; install Nsight Systems or Nsight Compute" >&2; exit 2
fi
