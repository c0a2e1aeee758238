#!/bin/bash
# Issue 33's GPU-host rows, on the lent H200 host once ../shared/gpu's host.sh serves vLLM at
# 127.0.0.1:8000 (PYTHONPATH holds /tmp/gpu-site). Writes under $OUT.
#   bench/gpu_rows.sh capacity N [ARGS]  one `golive capacity --concurrency 256` run (ARGS added,
#                                     e.g. --workers 8), its windows' figures
#   bench/gpu_rows.sh turns N         the same run under bench/turns.py: each loop turn's callbacks
#                                     timed by kind (diagnostic only)
#   bench/gpu_rows.sh floor N         capacity N with bench/ticker.py beside it: a bare loop's lag,
#                                     the host's floor under the same load
#   bench/gpu_rows.sh profile         the capacity run under cProfile (diagnostic only)
#   bench/gpu_rows.sh reads           bench/reads.py: one socket read's cost on this host
#   bench/gpu_rows.sh stalls          the same run under asyncio's debug mode: every callback
#                                     that held the loop over 20 ms, named (diagnostic only)
#   bench/gpu_rows.sh scaling         --workers scaling against nginx (vLLM stopped first)
set -uo pipefail
: "${OUT:?}"
export PYTHONPATH=/tmp/gpu-site:$PWD/src:$PWD/bench
CAP=(--target http://127.0.0.1:8000 --concurrency 256 --max-context 4096 --step-duration 8 --duration 20)
summary() {  # the windows' client figures, one line each
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    w = json.loads(line); c = w.get("client") or {}
    print(f"{w['phase']:<12} c{w.get('concurrency_cap')!s:<4} req {w.get('requests')!s:>5}  "
          f"loop p99 {c.get('loop_lag_p99_ms')!s:>7} max {c.get('loop_lag_max_ms')!s:>7}  "
          f"send p99 {c.get('send_lag_p99_ms')!s:>7}  cpu {c.get('cpu_share')}  {w.get('client_bottleneck') or ''}")
PY
}
case $1 in
capacity)
  n=$2; shift 2; b=/tmp/gpu-cap$n; rm -rf $b
  /usr/bin/time -v python3 -m golive capacity "${CAP[@]}" "$@" --out $b > $OUT/cap$n.log 2>&1
  echo "rc $?"; tail -5 $OUT/cap$n.log
  for f in $b/metrics/capacity-watchdog.jsonl $b/metrics/capacity-steps.jsonl $b/verdict.json; do
    cp $f $OUT/cap$n-$(basename $f); done
  summary $b/metrics/capacity-watchdog.jsonl | tee $OUT/cap$n-summary.txt ;;
turns)
  n=$2; b=/tmp/gpu-turns$n; rm -rf $b
  python3 bench/turns.py --turns-out $OUT/turns$n.json -m golive capacity "${CAP[@]}" --out $b > $OUT/turns$n.log 2>&1
  echo "rc $?"; tail -16 $OUT/turns$n.log
  cp $b/metrics/capacity-watchdog.jsonl $OUT/turns$n-capacity-watchdog.jsonl
  summary $b/metrics/capacity-watchdog.jsonl | tee $OUT/turns$n-summary.txt ;;
floor)
  python3 bench/ticker.py $OUT/floor$2-ticker.jsonl & tp=$!
  bash "$0" capacity "$2"; kill $tp; wait $tp
  date +%s; cat $OUT/floor$2-ticker.jsonl ;;
profile)
  b=/tmp/gpu-profile; rm -rf $b
  python3 -m cProfile -o $OUT/profile.pstats -m golive capacity "${CAP[@]}" --out $b > $OUT/profile.log 2>&1
  echo "rc $?"
  python3 -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('tottime').print_stats(45)" $OUT/profile.pstats > $OUT/profile-tottime.txt
  python3 -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('cumulative').print_stats(80)" $OUT/profile.pstats > $OUT/profile-cumulative.txt
  head -70 $OUT/profile-tottime.txt | tail -50 ;;
reads)
  for s in 16 128 256; do python3 bench/reads.py --sockets $s; done | tee $OUT/reads.jsonl ;;
stalls)
  b=/tmp/gpu-stalls; rm -rf $b
  PYTHONASYNCIODEBUG=1 python3 - "${CAP[@]}" --out $b > $OUT/stalls.log 2>&1 <<'PY'
import asyncio, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
real = asyncio.events.new_event_loop
def slow_loop():
    loop = real(); loop.slow_callback_duration = 0.020; return loop
asyncio.events.new_event_loop = slow_loop
from golive.cli.main import main
sys.argv = ["golive", "capacity", *sys.argv[1:]]
sys.exit(main())
PY
  echo "rc $?"; grep -c "took" $OUT/stalls.log; grep "took" $OUT/stalls.log | head -40
  summary $b/metrics/capacity-watchdog.jsonl | tee $OUT/stalls-summary.txt ;;
scaling)
  kill "$(cat /tmp/gpu-vllm.pid)" 2>/dev/null; sleep 5; pkill -f "vllm.entrypoints" ; sleep 2
  which nginx || { echo "no nginx on this host"; exit 4; }
  python3 bench/scaling.py --workers 1,2,4,8 --runs 3 --duration 8 --out $OUT/scaling.json
  python3 -c "import json,sys; [print(r) for r in json.load(open(sys.argv[1]))['rows']]" $OUT/scaling.json ;;
esac
