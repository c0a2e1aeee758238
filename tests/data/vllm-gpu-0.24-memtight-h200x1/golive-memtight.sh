#!/bin/bash
# On the H200: vLLM 0.24 (TP1, random weights) serving a memory-tight dense model — Qwen2.5-72B's
# width (hidden 8192, MLP 29568, 64 heads, 8 KV heads), 75 layers, tied embeddings: ~125 GiB of
# weights on a 140 GiB GPU — at the Kimi K3 recipe's --gpu-memory-utilization 0.95.
# usage: golive-memtight.sh serve | run   (serve returns once healthy; the server keeps running)
S=/root/stash
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
if [ "$1" = serve ]; then
  cp -r .gpu/t6/. $S/
  G=/tmp/gpu-site
  if [ ! -f $G/.ok ]; then
    mkdir -p $G && cat $S/part.* > /tmp/gpu-vllm.tar.xz || exit 3
    tar xJf /tmp/gpu-vllm.tar.xz -C $G || exit 3
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $G $S/deps/*.whl || exit 3
    touch $G/.ok
  fi
  export PYTHONPATH=$G
  M=/tmp/gpu-model-memtight; mkdir -p $M
  cp $S/model/{chat_template.jinja,generation_config.json,tokenizer.json,tokenizer_config.json} $M/
  python3 - $S/model/config.json $M/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=8192, intermediate_size=29568, num_attention_heads=64,
         num_key_value_heads=8, num_hidden_layers=75, tie_word_embeddings=True,
         layer_types=["full_attention"] * 75, max_window_layers=75)
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
  setsid python3 -m vllm.entrypoints.cli.main serve $M --served-model-name memtight-gpu \
    --load-format dummy --host 127.0.0.1 --port 8000 --max-model-len 4096 \
    --gpu-memory-utilization 0.95 --enable-prefix-caching --enable-auto-tool-choice \
    --tool-call-parser hermes > /tmp/gpu-vllm.log 2>&1 &
  echo $! > /tmp/gpu-vllm.pid
  for i in $(seq 1 480); do
    curl -sf localhost:8000/health >/dev/null && { echo "healthy after ${i}s"; cp /tmp/gpu-vllm.log $OUT/startup.log; nvidia-smi > $OUT/nvidia-smi.txt; exit 0; }
    kill -0 $(cat /tmp/gpu-vllm.pid) 2>/dev/null || break; sleep 1
  done
  echo "vLLM did not start"; cp /tmp/gpu-vllm.log $OUT/vllm-fail.log; tail -30 /tmp/gpu-vllm.log; exit 5
fi
export PYTHONPATH=/tmp/gpu-site:$PWD/src
G="python3 -m golive"
$G env collect --host -o /tmp/host.json > /dev/null 2>&1
$G env collect --container --python python3 -o /tmp/ctr.json > /dev/null 2>&1
export GOLIVE_CAPACITY_DURATION_S=30 GOLIVE_CAPACITY_MIN_SUSTAINED_S=30
export GOLIVE_CAPACITY_STEP_DURATION_S=6 GOLIVE_CAPACITY_CALIBRATION_S=5
start=$(date +%s)
timeout -s TERM 500 $G run --target http://127.0.0.1:8000 --log /tmp/gpu-vllm.log \
  --host-info /tmp/host.json --container-info /tmp/ctr.json --concurrency 16 \
  --max-context 4096 --repeat 3 --out /tmp/b > $OUT/run-stdout.txt 2> $OUT/run-stderr.txt
echo "golive run rc=$? in $(( $(date +%s) - start )) s"
$G decide /tmp/b > $OUT/decide.txt 2>&1; echo "decide rc=$?"
cp /tmp/b/verdict.json $OUT/verdict.json; cp /tmp/gpu-vllm.log $OUT/vllm.log
tar czf $OUT/bundle.tgz -C /tmp b; du -sh /tmp/b; ls -la $OUT
tail -5 $OUT/run-stderr.txt; tail -25 $OUT/run-stdout.txt
