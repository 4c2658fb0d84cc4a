#!/usr/bin/env bash
# The harness's trust checks on a GPU: why the escape check fired (round by round), the side-stream and
# reuse fixtures (caught) beside correct pairs of every bound (passing), the too-few-GPUs skip.
# Usage: scripts/h100_trust.sh OUTDIR [--quick]   Every step has its own time limit; the script exits 1 if any
# step failed (the fixtures' run must exit 1: they hold faults), after running the rest.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_trust.sh OUTDIR [--quick]}; quick=${2:-}
mkdir -p "$out/logs"
export PYTHONUNBUFFERED=1
logs=$out/logs
. "$(dirname "$0")/steps.sh"
TAIL=25 step escape_rounds 120 python3 scripts/escape_rounds.py --json "$out/escape_rounds.json"
# the faulty fixtures fail and the correct pairs beside them pass: benchmark.py exits 1, and its report must name
# exactly the two side-stream variants (exit 1 alone would also be a correct pair failing, or a crash)
rm -rf "$out/fixtures"   # a rerun replaces its report (benchmark.py refuses to write over one)
TAIL=25 expect fixtures 300 1 python3 benchmark.py --root tests/fixtures --chapter 92 --chapter 83 $quick \
  --output "$out/fixtures"
step fixtures_caught 30 python3 scripts/expect_failures.py "$out/fixtures" ch92/sidestream/optimized_sidestream_escaped \
  ch92/sidestream/optimized_sidestream_partial
# A 2-process pair on one GPU: skipped in a chapter run (exit 0), one-line error for --pair (exit 2)
TAIL=25 step skip_chapter 120 python3 benchmark.py --root tests/fixtures --chapter 91 --quick --no-report
TAIL=3 expect skip_pair 120 2 python3 benchmark.py --root tests/fixtures --pair ch91/allreduce --quick \
  --no-report
finish
