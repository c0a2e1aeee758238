"""Where everything lives in a bundle: one constant per fixed path (DESIGN.md §3). Paths are
relative to the bundle root; streams named per check or window are built from these folders
by the module that writes them.

```
verdict.json  report.md  report.html  signoff.json  signoff.md  manifest-sha256.txt
config/       the effective config, the profile and the policy the run was judged by
environment/  container and host facts, startup and server logs, the version chain
requests/     one JSONL stream of request records per check or phase
metrics/      /metrics scrapes and each family's evidence (steps, plans, protocols)
memory/       memory curves per phase, the engine's termination record
watch/        the post-approval watch's observations and triggers
parts/        the section bundles a combined bundle was decided from
```
"""

from __future__ import annotations

VERDICT = "verdict.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
SIGNOFF_JSON = "signoff.json"
SIGNOFF_MD = "signoff.md"
CAPACITY_REQUEST_JSON = "capacity-request.json"  # with an expand-capacity verdict only
CAPACITY_REQUEST_MD = "capacity-request.md"
MANIFEST = "manifest-sha256.txt"
PARTS = "parts"

EFFECTIVE_CONFIG = "config/effective.yaml"  # the config the run applied, secrets redacted
PROFILE = "config/profile.yaml"  # the profile's text, as applied
POLICY = "config/policy.yaml"  # the decision policy the verdict was judged by

STARTUP_LOG = "environment/startup.log"
CONTAINER = "environment/container.json"
CHAIN = "environment/chain.json"  # each layer's facts and each link's verdict
CHAIN_INPUTS = "environment/chain-inputs.json"  # what the chain rules read, and where
SERVER_LOG = "environment/server.log"  # the server's log as it was when the run ended
SERVER_LOG_ERRORS = "environment/server-log-errors.json"  # each error and what was in flight
GOLIVE_TRACEBACK = "environment/golive-traceback.txt"  # golive's own crash, for its bug report
RAY_NODES = "environment/ray-nodes.json"
K8S_PODS = "environment/k8s-pods.json"

SMOKE_REQUESTS = "requests/smoke.jsonl"
ENV_REQUESTS = "requests/env.jsonl"
ENV_METRICS = "metrics/env.prom"  # the env section's /metrics scrape (cache config)
AGENT_FAILURES = "requests/agent-failures.jsonl"
CAPACITY_SETUP_REQUESTS = "requests/capacity-setup.jsonl"
CAPACITY_LONG_INPUT_REQUESTS = "requests/capacity-long_input.jsonl"
CAPACITY_CONCURRENCY_REQUESTS = "requests/capacity-concurrency.jsonl"
CAPACITY_SUSTAINED_REQUESTS = "requests/capacity-sustained.jsonl"

SMOKE_PLAN = "metrics/smoke-plan.json"  # what the collector saw of each scrape
SMOKE_DELTA = "metrics/smoke-delta.json"
CAPACITY_STEPS = "metrics/capacity-steps.jsonl"  # one row per ramp step (StepStats)
CAPACITY_WATCHDOG = "metrics/capacity-watchdog.jsonl"  # each load window's caps and end
CAPACITY_CLIENTS = "metrics/capacity-clients.jsonl"  # --ray: each client's share of a window
CAPACITY_SUSTAINED = "metrics/capacity-sustained.json"  # the sustained window's StepStats
CAPACITY_KNEE_REPEATS = "metrics/capacity-knee-repeats.jsonl"  # windows again at a knee
# every load window's TTFT/ITL/TPOT/end-to-end percentiles, throughput and goodput
CAPACITY_LATENCY = "metrics/latency.json"
CAPACITY_LATENCY_CSV = "metrics/latency.csv"
CAPACITY_SLO = "metrics/slo.json"  # each window's objectives as the run judged them
CAPACITY_LADDER = "metrics/capacity-long_input.json"  # the long-input ladder's outcomes
CAPACITY_CALIBRATION = "metrics/capacity-calibration.json"
CAPACITY_WORKLOAD = "metrics/capacity-workload.json"  # the seed of this run's prompts
WORKLOAD_SAMPLE = "metrics/workload-sample.jsonl"  # the user's --sample, as the load sent it
# the server's /tokenize counts of the sample's prompts (records labelled sample-<line index>)
SAMPLE_TOKENS_STREAM = "workload-sample-tokens"
WORKLOAD_SAMPLE_TOKENS = f"requests/{SAMPLE_TOKENS_STREAM}.jsonl"
CAPACITY_PHASES = "metrics/capacity-phases.json"
ANSWER_PROBES_PLAN = "metrics/answer-probes.json"  # where the probes went under load
CACHE_PROTOCOL = "metrics/cache-protocol.json"  # what the cache collector resolved and sent
CACHE_STEPS = "metrics/cache-steps.jsonl"
AGENT_PLAN = "metrics/agent-plan.json"  # the cases as run and the settings that judge them
LEDGER_SENT = "metrics/ledger.json"  # what the clients counted as sent
METRIC_REFERENCE = "metrics/reference.json"  # names and HELP texts relied on, with the version

MEMORY_CURVE = "memory/capacity.csv"
GPU_DEVICES = "memory/gpus.json"  # the GPUs the capacity sampler read: index, uuid, memory
LOAD_CURVE = "memory/load.csv"
AFTER_LOAD_PROBE = "cache-after-load"  # the label of cache.after_load's one request
DCGM_USED = "memory/dcgm-fb-used.json"  # the DCGM exporter's answers (capacity.prometheus_url)
DCGM_FREE = "memory/dcgm-fb-free.json"
RAY_GPU_CURVE = "memory/ray-gpu-curve.jsonl"  # the Ray nodes' samplers' lines (--chain-ray)
# which node-side curves a capacity run asked for, the --gpu-curve files' copies and what
# the run met that the raw lines and answers cannot show (capacity.gpu_memory)
NODE_CURVES = "memory/node-curves.json"
TERMINATION = "memory/termination.json"
RESTART = "memory/restart.json"  # the deployment served again after a death (restart.py)
TERMINATION_AFTER_RESTART = "memory/termination-after-restart.json"  # it died again

WATCH_OBSERVATIONS = "watch/observations.jsonl"
WATCH_RECORDS = "watch/records.jsonl"
WATCH_SUMMARY = "watch/summary.json"
