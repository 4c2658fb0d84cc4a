#!/usr/bin/env bash
# Call 4 (H200): chapter 13 at full size (SIGTERM at the limit writes the finished pairs, marked interrupted).
set -uo pipefail
W=/tmp/w4; rm -rf $W; mkdir -p $W
( sleep 470; tar -czf $OUT/call4.tgz -C $W . ) & WATCH=$!
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.csv 2>&1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > $W/pip.log 2>&1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
[ -f profiles/peaks/cuda-nvidia-h200.json ] || cp diag/cuda-nvidia-h200.json profiles/peaks/
echo "== ch13 $(date +%T)"
GIT_COMMIT=$H timeout -s TERM $((455 - SECONDS)) python3 benchmark.py --chapter 13 --output $W/ch13 > $W/ch13.log 2>&1
echo "exit $?"; grep -E "^\s+(baseline|optimized\S*)\s+[0-9.]+ ms|pair\(s\) in|FAIL|SUSPECT|interrupted" $W/ch13.log | head -60
date -u +%FT%TZ >> $W/times.txt
kill $WATCH 2>/dev/null; tar -czf $OUT/call4.tgz -C $W .
