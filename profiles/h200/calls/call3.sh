#!/usr/bin/env bash
# Call 3 (H200): chapter 1 at full size.
set -uo pipefail
W=/tmp/w3; rm -rf $W; mkdir -p $W
( sleep 560; tar -czf $OUT/call3.tgz -C $W . ) & WATCH=$!
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.csv 2>&1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
python3 -m pip install -q --no-index --find-links .whl/pytest pytest > $W/pip.log 2>&1
python3 -m pip install -q --no-index --no-deps .whl/pytest_xdist*.whl .whl/execnet*.whl >> $W/pip.log 2>&1
[ -f profiles/peaks/cuda-nvidia-h200.json ] || cp diag/cuda-nvidia-h200.json profiles/peaks/
echo "== ch1 $(date +%T)"
GIT_COMMIT=$H timeout $((550 - SECONDS)) python3 benchmark.py --chapter 1 --output $W/ch1 > $W/ch1.log 2>&1
echo "exit $?"; grep -E "^\s+(baseline|optimized\S*)\s+[0-9.]+ ms|pair\(s\) in|FAIL|SUSPECT" $W/ch1.log | head -40
date -u +%FT%TZ >> $W/times.txt
kill $WATCH 2>/dev/null; tar -czf $OUT/call3.tgz -C $W .
