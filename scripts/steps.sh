#!/usr/bin/env bash
# The steps of the GPU session scripts (every scripts/h100_*.sh but h100_compare.sh sources this file; the two
# 2-GPU scripts, h200x2_*.sh, still have their own copies): each runs its steps through `step`, so one step that
# fails or hangs still leaves the others, and the exit status says whether any failed.
#   step NAME LIMIT CMD...         runs CMD under `timeout LIMIT` with its output in $logs/NAME.log, then prints
#                                  the log's last TAIL lines (default 12) and the exit status. A non-zero exit
#                                  sets rc=1 and adds NAME to $failed; the script goes on either way.
#   expect NAME LIMIT STATUS CMD...  the same, for a command that must exit STATUS (a fixture that holds a fault
#                                  exits 1): the step fails when CMD exits with any other status.
#   finish                         names the failed steps and exits 1 if any failed, else 0.
# A script sets $logs (an existing folder) before its first step and ends with `finish`.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then   # run, not sourced
  [[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
  echo "error: scripts/steps.sh is sourced by the session scripts (. scripts/steps.sh), not run" >&2; exit 2
fi
: "${logs:?set logs, the folder for the step logs, before sourcing scripts/steps.sh}"
rc=0 failed=""
step() { local name=$1 limit=$2 t0=$SECONDS r; shift 2; echo "== $name $(date +%T)" >&2
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1; r=$?
  grep -v '^      ' "$logs/$name.log" | tail -n "${TAIL:-12}"; echo "== $name: exit $r in $((SECONDS - t0)) s" >&2
  [ $r -eq 0 ] || { rc=1; failed="$failed $name"; }; return 0; }
expect() { local name=$1 limit=$2 want=$3; shift 3
  step "$name" "$limit" bash -c '"${@:2}"; r=$?; echo "exit $r, expected $1"; [ $r -eq "$1" ]' _ "$want" "$@"; }
finish() { [ $rc -eq 0 ] || echo "failed:$failed" >&2; exit $rc; }
