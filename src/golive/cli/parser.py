"""The command line's shape: every command and option. A flag that sets a setting is a config
key (`cli/config_flags.py`); the other flags name this invocation's inputs and outputs
(files, a PID, a cluster address). Parsing only: the handlers in cli/main.py's COMMANDS act."""

from __future__ import annotations

import argparse
from pathlib import Path

from golive import __version__
from golive.cli.config_flags import (
    AGENT_FLAGS,
    CACHE_FLAGS,
    CAPACITY_FLAGS,
    TARGET_FLAGS,
    WATCH_FLAGS,
    ConfigFlag,
    add_config_flags,
)
from golive.operate.alert_scope import FORMATS, RUNBOOK
from golive.target.models import VLLM_CPU_RELEASES, VLLM_CPU_VERSION


def _target_options(parser: argparse.ArgumentParser) -> None:
    # --target may come from the config file or GOLIVE_TARGET_URL: its absence is told after
    # the config is loaded (pipeline.judge), naming all three
    add_config_flags(parser, TARGET_FLAGS)
    parser.add_argument(
        "--config",
        type=Path,
        help="YAML config file (unknown keys are errors; default $GOLIVE_CONFIG; "
        "`golive init` writes one with every key)",
    )
    parser.add_argument("--out", type=Path, help="bundle directory (default ./golive-<time>)")
    parser.add_argument("--json", action="store_true", help="print verdict.json to stdout")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML for CI")


def _evidence_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log",
        type=Path,
        help="the vLLM server log: its startup, and (read again at the end) errors while serving",
    )
    parser.add_argument(
        "--nvidia-smi-xml",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="`nvidia-smi -q -x` output of one node (repeat per node)",
    )
    parser.add_argument(
        "--host-info",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="JSON from `golive env collect --host` (repeat per node)",
    )
    parser.add_argument(
        "--container-info",
        type=Path,
        metavar="FILE",
        help="JSON from `golive env collect --container`",
    )
    parser.add_argument("--image", help="image reference, name:tag@sha256:digest")


def _capacity_options(parser: argparse.ArgumentParser) -> None:
    add_config_flags(parser, CAPACITY_FLAGS)
    parser.add_argument("--sample", type=Path, help="JSONL of chat bodies to use as the workload")
    parser.add_argument("--target-pid", type=int, help="PID of a local server: sample its RSS")
    parser.add_argument(
        "--gpu-curve",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a node's `env collect --gpu-curve` CSV, merged by phase (repeat)",
    )


def _ray_option(parser: argparse.ArgumentParser, workers: bool = True) -> None:
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="send the traffic from one client actor per node of this (load) Ray cluster, "
        "as ray.init takes it: HEAD:6379, ray://HEAD:10001, auto",
    )
    if not workers:
        parser.set_defaults(workers=None)
        return
    parser.add_argument(
        "--workers",
        metavar="N",
        help="run the load windows' traffic engine in N processes of this machine, each "
        "with its own event loop (auto: one per core but one; default 1: in golive's own)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="golive", description="Decide whether a vLLM deployment may go live, and prove it."
    )
    parser.add_argument("--version", action="version", version=f"golive {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    smoke = sub.add_parser(
        "smoke", help="post-start checks: health, version, models, text, metrics"
    )
    _target_options(smoke)
    _add_env(sub)
    _add_capacity(sub)
    _add_cache_and_agent(sub)
    _add_after(sub)
    _add_config(sub)
    check = sub.add_parser("verify", help="check a bundle against its manifest")
    check.add_argument("bundle", type=Path)
    check.add_argument(
        "--key", type=Path, metavar="PEM", help="also check the manifest's Ed25519 signature"
    )
    demo = sub.add_parser(
        "demo", help="start the bundled local vLLM (CPU) and run golive against it"
    )
    demo.add_argument("--model", default="qwen", choices=("qwen", "smollm2"))
    demo.add_argument(
        "--engine-version",
        default=VLLM_CPU_VERSION,
        choices=VLLM_CPU_RELEASES,
        help=f"the vllm-cpu release to serve it with (default {VLLM_CPU_VERSION}; "
        "each gets its own engine venv, installed once)",
    )
    demo.add_argument("--out", type=Path, help="bundle directory (default ./golive-demo-<time>)")
    demo.add_argument("--json", action="store_true", help="print verdict.json to stdout")
    demo.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML for CI")
    target = sub.add_parser("target", help="the bundled local vLLM target")
    target_sub = target.add_subparsers(dest="target_command", required=True)
    setup = target_sub.add_parser("setup", help="install the engine venv and convert the models")
    setup.add_argument("--model", action="append", choices=("qwen", "smollm2"))
    return parser


def _add_config(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser(
        "init", help="write a golive.yaml holding every config key, its default and meaning"
    )
    init.add_argument("--profile", default="generic", help="generic | kimi-k3 | a profile YAML")
    init.add_argument("-o", "--output", type=Path, default=Path("golive.yaml"))
    init.add_argument("--force", action="store_true", help="replace an existing file")
    config = sub.add_parser("config", help="check a config file; print the key reference")
    actions = config.add_subparsers(dest="config_command", required=True)
    validate = actions.add_parser(
        "validate", help="load FILE as a run would (with the GOLIVE_* variables set now)"
    )
    validate.add_argument("file", type=Path, nargs="?", help="default $GOLIVE_CONFIG")
    actions.add_parser("reference", help="every key, default and variable (docs/config.md)")


def _add_env(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = sub.add_parser(
        "env",
        help="prove the version chain (image, vLLM, CUDA, drivers, startup log); "
        "`env collect` gathers raw facts on a node or in the container",
    )
    env.add_argument("action", nargs="?", choices=("collect",), help="collect raw facts here")
    _target_options(env)
    _evidence_options(env)
    collect = env.add_mutually_exclusive_group()
    collect.add_argument("--host", action="store_true", help="collect: this node's GPUs and driver")
    collect.add_argument("--container", action="store_true", help="collect: this container")
    env.add_argument("-o", "--output", type=Path, help="collect: where to write the JSON")
    env.add_argument(
        "--python",
        default="python3",
        help="collect --container: vLLM's Python, or a command reaching it (`docker exec -i CTR "
        "python3`, `kubectl exec -i -n NS POD -- python3`): the stdlib-only probe goes in on "
        "stdin, golive need not be installed there",
    )
    env.add_argument("--node", help="collect --host: node name (default: hostname)")
    env.add_argument(
        "--gpu-curve",
        action="store_true",
        help="collect: sample this node's GPU memory (NVML, 5 Hz) into -o as CSV",
    )
    env.add_argument("--duration", type=float, default=600.0, help="collect --gpu-curve: seconds")
    chain_ray_options(env, "--ray")
    k8s_options(env)


def _add_capacity(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    capacity = sub.add_parser(
        "capacity", help="the four pressure phases: model load, long input, concurrency, sustained"
    )
    _target_options(capacity)
    _capacity_options(capacity)
    capacity.add_argument("--log", type=Path, help="server log: model load; errors under load")
    _ray_option(capacity)
    capacity.add_argument(
        "--chain-ray",
        metavar="ADDRESS",
        help="the vLLM Ray cluster's Jobs API (http://HEAD:8265): sample every node's GPU "
        "memory over the phases",
    )
    capacity.add_argument(
        "--launch",
        metavar="CMD",
        help='start this server command first (e.g. "vllm serve ..."), record its load, '
        "run the phases against --target, then stop it",
    )


def _add_cache_and_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = sub.add_parser(
        "cache", help="prove prefix-cache reuse: cold, warm and control requests"
    )
    _target_options(cache)
    add_config_flags(cache, CACHE_FLAGS)
    cache.add_argument("--log", type=Path, help="server log: block size, Mamba mode, retention")
    agent = sub.add_parser(
        "agent", help="the Agent API contract: tool calls, schemas, streaming, retries, repeated"
    )
    _target_options(agent)
    add_config_flags(agent, (*AGENT_FLAGS, ConfigFlag("--concurrency", "agent.concurrency", "N")))
    _ray_option(agent, workers=False)
    run = sub.add_parser(
        "run",
        help="the whole programme: chain (rebuild stops), request classes, pressure phases, "
        "cache proof, Agent contract; then decide, seal, report",
    )
    _target_options(run)
    _evidence_options(run)
    _capacity_options(run)
    add_config_flags(run, (*CACHE_FLAGS, *AGENT_FLAGS))
    _ray_option(run)  # --ray: where the load comes from; --chain-ray: the vLLM cluster
    chain_ray_options(run, "--chain-ray")
    run.add_argument(
        "--sample-gpus",
        action="store_true",
        help="--chain-ray: also sample every GPU node's memory over the pressure phases "
        "(capacity.gpu_memory; with golive off the GPU hosts, capacity.memory judges them)",
    )
    k8s_options(run)  # the chain from the engine pods themselves, as `golive env` reads it


def _add_after(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that work after a run: signoff, watch, report, rollback, guardrails."""
    sign = sub.add_parser(
        "signoff", help="record the reviewer's signature over an intact bundle and re-seal it"
    )
    sign.add_argument("bundle", type=Path)
    sign.add_argument("--reviewer", required=True, help="the reviewer's name")
    sign.add_argument(
        "--outcome",
        required=True,
        choices=("go-live", "observe-with-limits", "hold", "expand-capacity", "rebuild"),
    )
    sign.add_argument(
        "--override-reason", help="required to sign go-live over a verdict that is not go-live"
    )
    sign.add_argument("--registry", type=Path, help="rollback registry (default $GOLIVE_REGISTRY)")
    sign.add_argument(
        "--sign-key", type=Path, metavar="PEM", help="sign the re-sealed manifest (Ed25519)"
    )
    sign.add_argument(
        "--trust-key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="refuse a bundle not sealed with this key's private half (golive run --sign-key); "
        "repeat for several (also signoff.trusted_keys in --config)",
    )
    sign.add_argument("--config", type=Path, help="YAML config (signoff.trusted_keys)")
    watch = sub.add_parser(
        "watch", help="post-approval watch window against an accepted bundle; rollback triggers"
    )
    _target_options(watch)
    watch.add_argument("--accepted", type=Path, required=True, help="the accepted bundle")
    add_config_flags(watch, WATCH_FLAGS)
    watch.add_argument("--log", type=Path, help="a log to follow (engine, kubelet, dmesg)")
    watch.add_argument("--registry", type=Path, help="rollback registry (default $GOLIVE_REGISTRY)")
    k8s_options(watch)
    report = sub.add_parser("report", help="render a bundle's report.html and report.md anew")
    report.add_argument("bundle", type=Path)
    report.add_argument("-o", "--output", type=Path, help="directory (default BUNDLE-report)")
    rollback = sub.add_parser("rollback", help="the accepted rollback artifacts")
    rollback.add_argument("action", choices=("show",))
    rollback.add_argument("--registry", type=Path, help="default $GOLIVE_REGISTRY or ~/.local/…")
    rollback.add_argument("--json", action="store_true")
    rails = sub.add_parser(
        "guardrails", help="Prometheus alerting rules for an accepted bundle's envelope"
    )
    rails.add_argument("bundle", type=Path)
    rails.add_argument("-o", "--output", type=Path, required=True, help="file to write")
    rails.add_argument(
        "--ttft-slo", type=float, help="TTFT SLO in seconds (default 1.5x the accepted p95)"
    )
    rails.add_argument(
        "--format",
        choices=FORMATS,
        default="rules",
        help="a Prometheus rules file (default), a Prometheus Operator PrometheusRule, or an "
        "Argo Rollouts AnalysisTemplate of the watch's rollback triggers",
    )
    rails.add_argument(
        "--selector",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label every expression matches, added to or overriding the bundle's "
        "(model_name, namespace); repeat it; KEY= drops one the bundle gave",
    )
    rails.add_argument(
        "--runbook-url",
        default=RUNBOOK,
        help="where docs/runbook.md is served; each alert links its section",
    )
    rails.add_argument(
        "--cache-floor",
        type=float,
        metavar="RATIO",
        help="prefix-cache hit ratio below which production regressed: your workload's own "
        "(the bundle measured golive's probe); without it the rule is left out and the "
        "AnalysisTemplate's cache-floor argument must be given by the Rollout",
    )
    rails.add_argument(
        "--trust-key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="the key the signed-off bundle's manifest was sealed with (golive signoff "
        "--sign-key): only then is the reviewer's signed digest copied onto the alerts",
    )
    decide = sub.add_parser(
        "decide", help="re-derive the verdict offline from a sealed bundle; must agree"
    )
    decide.add_argument("bundle", type=Path, nargs="?", help="re-derive this sealed bundle")
    decide.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        metavar="BUNDLE",
        help="one programme decision from sealed section bundles of one deployment",
    )
    decide.add_argument("--out", type=Path, help="the combined bundle (with --combine)")
    decide.add_argument(
        "--max-age-days",
        type=float,
        default=7.0,
        help="refuse parts that finished longer ago than this (with --combine; default 7)",
    )
    decide.add_argument(
        "--assume-same-deployment",
        metavar="REASON",
        help="combine parts where one knows an identity fact (vLLM version, served model, "
        "process start) that another lacks; the reason is recorded in verdict.json and the report",
    )
    decide.add_argument("--config", type=Path, help="sign-off owners for the combined decision")
    decide.add_argument("--policy", type=Path, help="decision policy for the combined decision")
    decide.add_argument("--json", action="store_true", help="print the re-derived decision")


def chain_ray_options(parser: argparse.ArgumentParser, flag: str) -> None:
    """The vLLM Ray cluster whose every node reports its facts (env: `--ray`; run, where
    `--ray` names the load cluster: `--chain-ray`)."""
    parser.add_argument(
        flag,
        dest="chain_ray",
        metavar="ADDRESS",
        help="collect every node's facts through this Ray cluster's Jobs API (http://HEAD:8265)",
    )
    parser.add_argument(
        "--expect-nodes", type=int, metavar="N", help=f"{flag}: the cluster must have N alive nodes"
    )
    parser.add_argument(
        "--ray-timeout", type=float, default=120.0, help=f"{flag}: seconds for the nodes to report"
    )
    parser.add_argument(
        "--ray-container",
        action="store_true",
        help=f"{flag}: also collect container facts (the Ray workers run in the serving image)",
    )


def k8s_options(parser: argparse.ArgumentParser) -> None:
    """The engine pods to read (env: their images, nodes, logs; watch: their restarts)."""
    parser.add_argument("--k8s-namespace", metavar="NS", help="read the engine pods in NS")
    parser.add_argument("--selector", help="--k8s-namespace: the engine pods' label selector")
    parser.add_argument("--k8s-container", help="the engine container (default: each pod's first)")
    parser.add_argument("--kubeconfig", type=Path, help="default: in-cluster, then $KUBECONFIG")
