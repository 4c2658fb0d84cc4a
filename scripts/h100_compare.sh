#!/usr/bin/env bash
# Before/after on one GPU machine: a chapter's report from an older copy of the repository (BEFORE) and from this
# tree, in the order given, then `benchmark.py --compare` of the two sides. Both sides use the same ceilings.
# Usage: scripts/h100_compare.sh OUTDIR BEFORE_DIR CHAPTER ORDER TAG   e.g. ... /tmp/out .before 1 ab x
#   CHAPTER: a number, or chN/pair for one pair.
#   ORDER: a = this tree (after), b = BEFORE_DIR; runs land in OUTDIR/{after,before}/TAG<k>, logs beside them.
#   GIT_COMMIT and BEFORE_COMMIT name the two sides in the reports (the copies have no .git).
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:?usage: scripts/h100_compare.sh OUTDIR BEFORE_DIR CHAPTER ORDER TAG} before=${2:?} ch=${3:?} order=${4:?}
tag=${5:?}
here=$PWD
if [[ $ch == */* ]]; then sel=(--pair "$ch"); else sel=(--chapter "$ch"); fi
mkdir -p "$out/after" "$out/before"
export PYTHONUNBUFFERED=1
rc=0
ls profiles/peaks/cuda-*.json >/dev/null 2>&1 || timeout 200 python3 benchmark.py --peaks >"$out/peaks-$tag.log" 2>&1
mkdir -p "$before/profiles/peaks" && cp profiles/peaks/cuda-*.json "$before/profiles/peaks/"
for ((k = 0; k < ${#order}; k++)); do
  side=${order:k:1} run="$tag$k"
  if [ "$side" = a ]; then dir="$here" name=after commit=${GIT_COMMIT:-unknown}
  else dir="$before" name=before commit=${BEFORE_COMMIT:-unknown}; fi
  echo "== $name $run" >&2
  rm -rf "${out:?}/$name/$run"   # a rerun of a tag replaces its run (benchmark.py refuses to write over one)
  (cd "$dir" && GIT_COMMIT=$commit timeout 330 python3 benchmark.py "${sel[@]}" --output "$out/$name/$run" \
    > "$out/$name/$run.log" 2>&1); r=$?
  tail -3 "$out/$name/$run.log"; echo "== $name $run: exit $r" >&2; [ $r -eq 0 ] || rc=1
done
timeout 60 python3 benchmark.py --compare "$out/before" "$out/after" > "$out/compare-$tag.txt" 2>&1
tail -30 "$out/compare-$tag.txt"
exit $rc
