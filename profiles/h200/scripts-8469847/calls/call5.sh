#!/usr/bin/env bash
# Call 5 (H200): scripts/h100_topics.sh pairs and scripts/h100_ch16.sh decode, parts of scripts moved onto steps.sh
# that had not run on a GPU since; it must exit 0. Its work folder comes back without traces or
# files over 3 MB (16 MiB a file), whole even where a limit stopped the script before its own archive.
set -uo pipefail
W=/tmp/w5; rm -rf $W; mkdir -p $W
pack() { for d in $(find /tmp -maxdepth 1 -name "tmp.*" -type d -newer $W/HEAD); do [ -d "$d/logs" ] && cp -r "$d" "$W/work-$(basename "$d")"; done
  find $W -name '*.trace.json' -delete; find $W -type f -size +3M -delete
  tar -czf $OUT/call5.tgz --exclude='*.tar.gz' -C $W .; }
( sleep 520; pack ) & WATCH=$!
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
H=$(cat diag/HEAD); echo $H > $W/HEAD; date -u +%FT%TZ > $W/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $W/gpu.csv 2>&1
mkdir -p profiles/peaks && cp diag/cuda-nvidia-h200.json profiles/peaks/
python3 -m pip install -q --no-index --find-links .whl/pytest pytest > $W/pip.log 2>&1
show() { grep -E "^==|^failed|exit [0-9]+|MISMATCH|passed|wrote|FAILED|SUSPECT" "$1" | tail -50; }
echo "== h100_topics.sh pairs $(date +%T)"
timeout 200 scripts/h100_topics.sh $W/topics-$H pairs > $W/topics.log 2>&1
echo "exit $?"; show $W/topics.log; date -u +%FT%TZ >> $W/times.txt
echo "== h100_ch16.sh decode $(date +%T)"
timeout 290 scripts/h100_ch16.sh $W/ch16-$H decode > $W/ch16.log 2>&1
echo "exit $?"; show $W/ch16.log; date -u +%FT%TZ >> $W/times.txt
kill $WATCH 2>/dev/null; pack; ls -la $OUT
