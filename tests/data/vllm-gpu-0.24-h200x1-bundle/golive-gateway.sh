#!/bin/bash
# On the H200: vLLM 0.24 (TP1, random weights) behind a gateway that serves its model as
# "kimi"; golive smoke through the gateway with --engine-url (the request classes held to the
# engine), then golive's whole programme with short windows straight at the engine. What
# comes back goes under $OUT.
S=/root/stash
cp -r .gpu/t6/. $S/
bash $S/host.sh $S 1 8000 --enable-auto-tool-choice --tool-call-parser hermes > $OUT/host.txt 2>&1 || { tail -60 /tmp/gpu-vllm.log > $OUT/vllm-fail.txt; cat $OUT/host.txt; exit 5; }
cat $OUT/host.txt
export PYTHONPATH=/tmp/gpu-site:$PWD/src
G="python3 -m golive"
python3 $S/alias_gateway.py http://127.0.0.1:8000 9000 kimi > $OUT/gateway.txt 2>&1 &
for i in $(seq 1 30); do curl -sf localhost:9000/v1/models > /dev/null && break; sleep 0.5; done
curl -s localhost:9000/v1/models | head -c 300; echo
export GOLIVE_SMOKE_CLASSES=true
start=$(date +%s)
timeout -s TERM 150 $G smoke --target http://127.0.0.1:9000 --engine-url http://127.0.0.1:8000 \
  --out /tmp/g > $OUT/gw-stdout.txt 2> $OUT/gw-stderr.txt
echo "gateway smoke rc=$? in $(( $(date +%s) - start )) s"
$G decide /tmp/g > $OUT/gw-decide.txt 2>&1; echo "gateway decide rc=$?"
tar czf $OUT/gateway-bundle.tgz -C /tmp g
unset GOLIVE_SMOKE_CLASSES
$G env collect --host -o /tmp/host.json > /dev/null 2>&1
$G env collect --container --python python3 -o /tmp/ctr.json > /dev/null 2>&1
export GOLIVE_CAPACITY_DURATION_S=30 GOLIVE_CAPACITY_MIN_SUSTAINED_S=30
export GOLIVE_CAPACITY_STEP_DURATION_S=6 GOLIVE_CAPACITY_CALIBRATION_S=5
start=$(date +%s)
timeout -s TERM 330 $G run --target http://127.0.0.1:8000 --log /tmp/gpu-vllm.log \
  --host-info /tmp/host.json --container-info /tmp/ctr.json --concurrency 16 \
  --max-context 4096 --repeat 3 --out /tmp/b > $OUT/run-stdout.txt 2> $OUT/run-stderr.txt
echo "golive run rc=$? in $(( $(date +%s) - start )) s"
$G decide /tmp/b > $OUT/decide.txt 2>&1; echo "decide rc=$?"
cp /tmp/b/verdict.json $OUT/verdict.json
tar czf $OUT/bundle.tgz -C /tmp b; du -sh /tmp/b
tail -3 $OUT/run-stderr.txt; tail -20 $OUT/run-stdout.txt
