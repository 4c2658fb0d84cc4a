#!/usr/bin/env bash
# Does a profile slow the timings after it in the same worker process? (written for an H100; about 13 minutes
# for all, so run the parts as separate calls on one warm machine).
# Usage: scripts/h100_cupti.sh OUTDIR [probe|warm|alternate|all]   (default all; OUTDIR defaults to $OUT)
#   probe      scripts/cupti_probe.py: fresh processes timing host-bound calls before and after torch.profiler,
#              with CUPTI left attached, torn down (TEARDOWN_CUPTI=1, what a CUDA run's workers set), and no profile.
#   warm       benchmark.py on compile_shapes and fp8_linear once, plain: fills the compile caches (a fresh
#              machine's first compile_shapes run spent minutes compiling) and is the first plain run.
#   alternate  the same pairs with --profile torch, plain, --profile torch, back to back (with warm: alternating).
#              On the H200 at 105c17f: warm 123 s, alternate 68 + 68 + 67 s.
# Compile caches live in build/ (git-ignored; kept between calls on a warm machine). Carried wheels in .whl/
# (torchao, GemLite: fp8_linear's variants) install into /tmp/site when present.
# What comes back: OUTDIR/cupti_<part>.tar.gz (reports, logs) and OUTDIR/cupti_<part>.log.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
out=${1:-${OUT:?usage: scripts/h100_cupti.sh OUTDIR [probe|warm|alternate|all]}}
part=${2:-all}
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out" "$work/logs" build
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=$PWD/build/inductor TRITON_CACHE_DIR=$PWD/build/triton
if ls .whl/*.whl >/dev/null 2>&1; then
  $py -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
pairs=(--pair compile_shapes --pair fp8_linear)
logs=$work/logs TAIL=30
. "$(dirname "$0")/steps.sh"
bench() { local name=$1 limit=$2; shift 2
  step "$name" "$limit" $py benchmark.py "${pairs[@]}" "$@" --output "$work/$name"; }
run_part() {
  case $1 in
    probe) TAIL=40 step probe 240 $py scripts/cupti_probe.py --out "$work/probe.json" ;;
    warm) bench plain0 300 ;;
    alternate) bench profile1 180 --profile torch; bench plain1 180; bench profile2 180 --profile torch ;;
    all) run_part probe; run_part warm; run_part alternate ;;
    *) echo "unknown part: $1 (probe, warm, alternate or all)" >&2; exit 2 ;;
  esac
}
{ $py -c "import torch, importlib.util as u; print('torch', torch.__version__, torch.cuda.get_device_name(0),
'torchao', bool(u.find_spec('torchao')), 'gemlite', bool(u.find_spec('gemlite')))"; nvidia-smi \
  --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv; \
  } > "$work/logs/versions_$part.log" 2>&1
cat "$work/logs/versions_$part.log"
{ run_part "$part"; finish; } 2>&1 | tee "$work/logs/cupti_$part.log"
rc=${PIPESTATUS[0]}
cp "$work/logs/cupti_$part.log" "$out/cupti_$part.log"
tar -czf "$out/cupti_$part.tar.gz" -C "$work" .
exit $rc
