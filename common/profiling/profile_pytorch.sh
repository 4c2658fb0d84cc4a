#!/usr/bin/env bash
# Profile a PyTorch script: Nsight Systems when installed, else torch.profiler.
#   common/profiling/profile_pytorch.sh SCRIPT [ARGS...]
# Writes profiles/profile-<script>-<time>/ (an .nsys-rep, or a Chrome/Perfetto trace.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 SCRIPT [ARGS...]" >&2; exit 2; }
script=$1; shift
[ -f "$script" ] || { echo "error: $script does not exist" >&2; exit 2; }
py=${PYTHON:-$( [ -x "$root/.venv/bin/python" ] && echo "$root/.venv/bin/python" || echo python3 )}
out="$root/profiles/profile-$(basename "$script" .py)-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
if command -v nsys >/dev/null; then
  echo "profiling with nsys -> $out"
  nsys profile -t cuda,nvtx,osrt -o "$out/$(basename "$script" .py)" --force-overwrite=true "$py" "$script" "$@"
else
  echo "nsys not installed: profiling with torch.profiler -> $out"
  PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$py" -m common.profiling.torch_trace "$out/trace.json" "$script" "$@"
fi
