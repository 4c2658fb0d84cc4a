#!/usr/bin/env bash
# The harness's trust checks on a GPU: why the escape check fired (round by round), the side-stream and
# reuse fixtures (caught) beside correct pairs of every bound (passing), the too-few-GPUs skip.
# Usage: scripts/h100_trust.sh OUTDIR [--quick]   Every step has its own time limit; a failing step fails the script.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_trust.sh OUTDIR [--quick]}; quick=${2:-}
mkdir -p "$out/logs"
export PYTHONUNBUFFERED=1
rc=0
step() { local name=$1 limit=$2; shift 2; echo "== $name" >&2
  timeout "$limit" "$@" > "$out/logs/$name.log" 2>&1; local r=$?
  grep -v '^      ' "$out/logs/$name.log" | tail -${TAIL:-25}; echo "== $name: exit $r" >&2; [ $r -eq 0 ] || rc=1; return 0; }
step escape_rounds 120 python3 scripts/escape_rounds.py --json "$out/escape_rounds.json"
# Exit 1 expected: the fixtures hold the faults
rm -rf "$out/fixtures"   # a rerun replaces its report (benchmark.py refuses to write over one)
step fixtures 300 python3 benchmark.py --root tests/fixtures --chapter 92 --chapter 83 $quick --output "$out/fixtures"
grep -q '"status": "failed"' "$out/fixtures/results.json" 2>/dev/null && rc=$((rc))   # failures here are the point
# A 2-process pair on one GPU: skipped in a chapter run (exit 0), one-line error for --pair (exit 2)
step skip_chapter 120 python3 benchmark.py --root tests/fixtures --chapter 91 --quick --no-report
TAIL=3 step skip_pair 120 python3 benchmark.py --root tests/fixtures --pair ch91/allreduce --quick --no-report
exit $rc
