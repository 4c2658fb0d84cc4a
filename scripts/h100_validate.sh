#!/usr/bin/env bash
# Harness validation on a GPU machine: ncu side by side, do_bench, launch batches, peaks, repeatability.
# Usage: scripts/h100_validate.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/h100_validate.sh OUTDIR}
mkdir -p "$out/ncu"
export PYTHONUNBUFFERED=1
scripts/ncu_targets.sh "$out/ncu" 2>&1 | tail -3
python3 scripts/validate_harness.py --out "$out" --ncu-csv "$out"/ncu/*.csv
