#!/usr/bin/env bash
# Call 5 (H200): chapter 16 at full size, SIGTERM at 205 s (the finished pairs written, marked interrupted).
set -uo pipefail
W=/tmp/w5; rm -rf $W; mkdir -p $W
( sleep 215; tar -czf $OUT/call5.tgz -C $W . ) & WATCH=$!
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.csv 2>&1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > $W/pip.log 2>&1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
[ -f profiles/peaks/cuda-nvidia-h200.json ] || cp diag/cuda-nvidia-h200.json profiles/peaks/
echo "== ch16 $(date +%T)"
GIT_COMMIT=$H timeout -s TERM $((205 - SECONDS)) python3 benchmark.py --chapter 16 --output $W/ch16 > $W/ch16.log 2>&1
echo "exit $?"; grep -E "^\s+(baseline|optimized\S*)\s+[0-9.]+ ms|pair\(s\) in|FAIL|SUSPECT|interrupted" $W/ch16.log | head -60
date -u +%FT%TZ >> $W/times.txt
kill $WATCH 2>/dev/null; tar -czf $OUT/call5.tgz -C $W .
