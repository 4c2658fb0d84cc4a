#!/usr/bin/env bash
# Call 1 (H200): the ceilings of this GPU, ch11/concurrent_gemms at LONGEST_K_FIRST, the test suite's
# not-serial part with the GPU visible.
set -uo pipefail
W=/tmp/w1; rm -rf $W; mkdir -p $W
( sleep 555; tar -czf $OUT/call1.tgz -C $W . ) & WATCH=$!
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > $W/gpu.csv 2>&1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
python3 -c "import torch; print(torch.__version__, torch.version.cuda); print(torch.cuda.get_device_properties(0))" > $W/torch.txt 2>&1
python3 -m pip install -q --no-index --find-links .whl/pytest pytest > $W/pip.log 2>&1
python3 -m pip install -q --no-index --no-deps .whl/pytest_xdist*.whl .whl/execnet*.whl >> $W/pip.log 2>&1
echo "== peaks $(date +%T)"; GIT_COMMIT=$H timeout 150 python3 benchmark.py --peaks > $W/peaks.log 2>&1; echo "exit $?"
cp profiles/peaks/cuda-nvidia-h200*.json $W/ 2>/dev/null; tail -n 4 $W/peaks.log
echo "== pair $(date +%T)"
GIT_COMMIT=$H timeout 150 python3 benchmark.py --pair ch11/concurrent_gemms --output $W/pair > $W/pair.log 2>&1
echo "exit $?"; grep -E "^\s+(baseline|optimized\S*)\s+[0-9.]+ ms|pair\(s\) in|FAIL|SUSPECT" $W/pair.log | head
echo "== suite (not serial) $(date +%T)"
timeout 320 python3 -m pytest -q -p no:cacheprovider -n 12 --dist loadfile -m "not serial" -rfEs tests > $W/suite.log 2>&1
echo "exit $?"; grep -E "^(FAILED|ERROR)|passed|failed" $W/suite.log | tail -n 25
date -u +%FT%TZ >> $W/times.txt
kill $WATCH 2>/dev/null; tar -czf $OUT/call1.tgz -C $W .
