#!/usr/bin/env bash
# Call 2 (H200): the nvshmem_training fix's test, the suite's serial part, chapter 11 at full size.
set -uo pipefail
W=/tmp/w2; rm -rf $W; mkdir -p $W
( sleep 560; tar -czf $OUT/call2.tgz -C $W . ) & WATCH=$!
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.csv 2>&1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
python3 -m pip install -q --no-index --find-links .whl/pytest pytest > $W/pip.log 2>&1
python3 -m pip install -q --no-index --no-deps .whl/pytest_xdist*.whl .whl/execnet*.whl >> $W/pip.log 2>&1
[ -f profiles/peaks/cuda-nvidia-h200.json ] || cp diag/cuda-nvidia-h200.json profiles/peaks/
echo "== nvshmem_training test $(date +%T)"
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_nvshmem_training.py > $W/nvshmem_training.log 2>&1
echo "exit $?"; tail -n 2 $W/nvshmem_training.log
echo "== suite (serial) $(date +%T)"
timeout 330 python3 -m pytest -q -p no:cacheprovider -m serial -rfEs tests > $W/serial.log 2>&1
echo "exit $?"; grep -E "^(FAILED|ERROR)|passed|failed" $W/serial.log | tail -n 25
echo "== ch11 $(date +%T)"
GIT_COMMIT=$H timeout $((545 - SECONDS)) python3 benchmark.py --chapter 11 --output $W/ch11 > $W/ch11.log 2>&1
echo "exit $?"; grep -E "^\s+(baseline|optimized\S*)\s+[0-9.]+ ms|pair\(s\) in|FAIL|SUSPECT" $W/ch11.log | head -30
date -u +%FT%TZ >> $W/times.txt
kill $WATCH 2>/dev/null; tar -czf $OUT/call2.tgz -C $W .
