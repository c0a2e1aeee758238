#!/bin/bash
# On the H200: serve vLLM 0.24 (TP1, random weights) and run golive's whole programme with
# short windows, to keep the sealed bundle itself (records, scrapes, curves) as test data for
# the mutation suite. Everything that comes back goes under $OUT.
S=/root/stash
cp -r .gpu/t6/. $S/
bash $S/host.sh $S 1 8000 --enable-auto-tool-choice --tool-call-parser hermes > $OUT/host.txt 2>&1 || { tail -60 /tmp/gpu-vllm.log > $OUT/vllm-fail.txt; cat $OUT/host.txt; exit 5; }
cat $OUT/host.txt
export PYTHONPATH=/tmp/gpu-site:$PWD/src
G="python3 -m golive"
$G env collect --host -o /tmp/host.json > /dev/null 2>&1
$G env collect --container --python python3 -o /tmp/ctr.json > /dev/null 2>&1
export GOLIVE_CAPACITY_DURATION_S=30 GOLIVE_CAPACITY_MIN_SUSTAINED_S=30
export GOLIVE_CAPACITY_STEP_DURATION_S=6 GOLIVE_CAPACITY_CALIBRATION_S=5
start=$(date +%s)
timeout -s TERM 400 $G run --target http://127.0.0.1:8000 --log /tmp/gpu-vllm.log \
  --host-info /tmp/host.json --container-info /tmp/ctr.json --concurrency 16 \
  --max-context 4096 --repeat 3 --out /tmp/b > $OUT/run-stdout.txt 2> $OUT/run-stderr.txt
echo "golive run rc=$? in $(( $(date +%s) - start )) s"
$G decide /tmp/b > $OUT/decide.txt 2>&1; echo "decide rc=$?"
cp /tmp/b/verdict.json $OUT/verdict.json
tar czf $OUT/bundle.tgz -C /tmp b; du -sh /tmp/b; ls -la $OUT
tail -5 $OUT/run-stderr.txt; tail -25 $OUT/run-stdout.txt
