#!/usr/bin/env bash
# Profile validate_harness.py's calls with ncu, one call type per run, under two clock policies:
#   none  the GPU boosts as it likes (kernels run isolated, on an idle, cool GPU)
#   base  ncu's default: clocks locked to base
# Writes DIR/ncu_<policy>__<target>.csv for validate_harness.py --ncu-csv.
set -euo pipefail
dir=${1:?usage: scripts/ncu_targets.sh OUTDIR}
command -v ncu >/dev/null || { echo "error: ncu is not on PATH (Nsight Compute)" >&2; exit 2; }
mkdir -p "$dir"
for target in add_64M_fp32 matmul_8192_bf16 add_1_element; do
  for clock in none base; do
    ncu --csv --metrics gpu__time_duration.sum --profile-from-start off --clock-control "$clock" \
        python3 "$(dirname "$0")/validate_harness.py" --ncu-target "$target" > "$dir/ncu_${clock}__${target}.csv"
  done
done
