#!/bin/bash
# On the H200: serve vLLM 0.24 (TP1, random weights) and run golive's programme against it the
# way a new user would: golive init, the target and config from GOLIVE_* variables, plain
# progress lines (no terminal). Everything that comes back goes under $OUT.
S=/root/stash
cp -r .gpu/t6/. $S/
bash $S/host.sh $S 1 8000 --enable-auto-tool-choice --tool-call-parser hermes > $OUT/host.txt 2>&1 || { tail -60 /tmp/gpu-vllm.log > $OUT/vllm-fail.txt; cat $OUT/host.txt; exit 5; }
cat $OUT/host.txt
export PYTHONPATH=/tmp/gpu-site:$PWD/src
G="python3 -m golive"
$G env collect --host -o /tmp/host.json > /dev/null 2>&1
$G env collect --container --python python3 -o /tmp/ctr.json > /dev/null 2>&1
$G init -o /tmp/golive.yaml
export GOLIVE_CONFIG=/tmp/golive.yaml GOLIVE_TARGET_URL=http://127.0.0.1:8000
export GOLIVE_CAPACITY_DURATION_S=60 GOLIVE_CAPACITY_MIN_SUSTAINED_S=60
start=$(date +%s)
timeout -s TERM 390 $G run --log /tmp/gpu-vllm.log --host-info /tmp/host.json \
  --container-info /tmp/ctr.json --concurrency 64 --max-context 8192 --repeat 3 --out /tmp/b \
  > $OUT/run-stdout.txt 2> $OUT/run-stderr.txt
echo "golive run rc=$? in $(( $(date +%s) - start )) s"
$G decide /tmp/b > $OUT/decide.txt 2>&1; echo "decide rc=$?"
cp /tmp/b/verdict.json $OUT/verdict.json
tar cf $OUT/bundle.tar -C /tmp b; ls -la $OUT
tail -5 $OUT/run-stderr.txt; tail -25 $OUT/run-stdout.txt
