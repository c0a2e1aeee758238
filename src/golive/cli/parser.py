"""The command line's shape: every command and option, and the config keys the flags set
(parsing only; cli/main.py acts)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from golive import __version__
from golive.config import PROFILES
from golive.target.models import VLLM_CPU_RELEASES, VLLM_CPU_VERSION


def _target_options(parser: argparse.ArgumentParser, target_required: bool = True) -> None:
    parser.add_argument("--target", required=target_required, help="OpenAI-compatible base URL")
    parser.add_argument("--metrics-url", help="Prometheus metrics URL (default <target>/metrics)")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable holding the API key"
    )
    parser.add_argument("--model", help="served model name (default: the first one listed)")
    parser.add_argument("--engine-url", help="gateway mode: the engine behind the --target gateway")
    parser.add_argument("--config", type=Path, help="YAML config file (unknown keys are errors)")
    parser.add_argument("--profile", help=f"{' | '.join(PROFILES)} | path to a profile YAML")
    parser.add_argument("--out", type=Path, help="bundle directory (default ./golive-<time>)")
    parser.add_argument("--json", action="store_true", help="print verdict.json to stdout")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML for CI")
    parser.add_argument("--policy", type=Path, help="decision policy file (default: bundled)")
    parser.add_argument(
        "--sign-key", type=Path, metavar="PEM", help="sign the manifest (Ed25519 private key)"
    )


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
    parser.add_argument("--concurrency", type=int, help="highest concurrency of the ramp")
    parser.add_argument("--max-context", type=int, help="intended max input tokens")
    parser.add_argument("--duration", type=float, help="sustained phase, seconds")
    parser.add_argument("--step-duration", type=float, help="each ramp step, seconds")
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


def _cache_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prefix-tokens", type=int, help="shared prefix size (default: from blocks)"
    )
    parser.add_argument("--warm-repeats", type=int, default=5, help="warm requests (default 5)")
    parser.add_argument(
        "--cold-samples", type=int, default=3, help="cold requests for the TTFT test"
    )


def _agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeat", type=int, help="runs per case, streamed and non-streamed each (default 20)"
    )
    parser.add_argument(
        "--schemas", type=Path, help="your tool schemas (YAML/JSON `tools:` list), a case each"
    )
    parser.add_argument(
        "--case", action="append", metavar="NAME", help="run only this Agent case (repeatable)"
    )
    parser.add_argument("--temperature", type=float, help="Agent sampling temperature (0.6)")


def _ray_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="send the traffic from one client actor per node of this (load) Ray cluster, "
        "as ray.init takes it: HEAD:6379, ray://HEAD:10001, auto",
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


def _add_env(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = sub.add_parser(
        "env",
        help="prove the version chain (image, vLLM, CUDA, drivers, startup log); "
        "`env collect` gathers raw facts on a node or in the container",
    )
    env.add_argument("action", nargs="?", choices=("collect",), help="collect raw facts here")
    _target_options(env, target_required=False)
    _evidence_options(env)
    collect = env.add_mutually_exclusive_group()
    collect.add_argument("--host", action="store_true", help="collect: this node's GPUs and driver")
    collect.add_argument("--container", action="store_true", help="collect: this container")
    env.add_argument("-o", "--output", type=Path, help="collect: where to write the JSON")
    env.add_argument("--python", default="python3", help="collect --container: vLLM's Python")
    env.add_argument("--node", help="collect --host: node name (default: hostname)")
    env.add_argument(
        "--gpu-curve",
        action="store_true",
        help="collect: sample this node's GPU memory (NVML, 5 Hz) into -o as CSV",
    )
    env.add_argument("--duration", type=float, default=600.0, help="collect --gpu-curve: seconds")
    env.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="collect every node's facts through this Ray cluster's Jobs API (http://HEAD:8265)",
    )
    env.add_argument(
        "--expect-nodes", type=int, metavar="N", help="--ray: the cluster must have N alive nodes"
    )
    env.add_argument(
        "--ray-timeout", type=float, default=120.0, help="--ray: seconds for the nodes to report"
    )
    env.add_argument("--k8s-namespace", metavar="NS", help="read the engine pods in NS")
    env.add_argument("--selector", help="--k8s-namespace: the engine pods' label selector")
    env.add_argument("--k8s-container", help="the engine container (default: each pod's first)")
    env.add_argument("--kubeconfig", type=Path, help="default: in-cluster, then $KUBECONFIG")
    env.add_argument(
        "--ray-container",
        action="store_true",
        help="--ray: also collect container facts (the Ray workers run in the serving image)",
    )


def _add_capacity(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    capacity = sub.add_parser(
        "capacity", help="the four pressure phases: model load, long input, concurrency, sustained"
    )
    _target_options(capacity)
    _capacity_options(capacity)
    capacity.add_argument("--log", type=Path, help="server log: model load; errors under load")
    _ray_option(capacity)
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
    _cache_options(cache)
    cache.add_argument("--log", type=Path, help="server log: block size, Mamba mode, retention")
    agent = sub.add_parser(
        "agent", help="the Agent API contract: tool calls, schemas, streaming, retries, repeated"
    )
    _target_options(agent)
    _agent_options(agent)
    agent.add_argument("--concurrency", type=int, help="requests in flight (default 4)")
    _ray_option(agent)
    run = sub.add_parser(
        "run",
        help="the whole programme: chain (rebuild stops), request classes, pressure phases, "
        "cache proof, Agent contract; then decide, seal, report",
    )
    _target_options(run)
    _evidence_options(run)
    _capacity_options(run)
    _cache_options(run)
    _agent_options(run)
    _ray_option(run)


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
    watch = sub.add_parser(
        "watch", help="post-approval watch window against an accepted bundle; rollback triggers"
    )
    _target_options(watch)
    watch.add_argument("--accepted", type=Path, required=True, help="the accepted bundle")
    watch.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    watch.add_argument("--interval", type=float, default=10.0, help="seconds (default 10)")
    watch.add_argument("--probe-deadline", type=float, default=30.0, help="synthetic deadline")
    watch.add_argument("--tool-every", type=int, default=6, help="tool-call probe, intervals")
    watch.add_argument("--cache-every", type=int, default=6, help="cache probe, intervals")
    watch.add_argument("--repeated", type=int, default=3, help="intervals outside the envelope")
    watch.add_argument("--missing-limit", type=int, default=3, help="silent intervals → alert")
    watch.add_argument("--log", type=Path, help="a log to follow (engine, kubelet, dmesg)")
    watch.add_argument("--on-rollback", metavar="CMD", help="run on a rollback trigger")
    watch.add_argument("--cooldown", type=float, default=600.0, help="seconds between rollbacks")
    watch.add_argument("--registry", type=Path, help="rollback registry (default $GOLIVE_REGISTRY)")
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
    rails.add_argument("-o", "--output", type=Path, required=True, help="rules file to write")
    rails.add_argument(
        "--ttft-slo", type=float, help="TTFT SLO in seconds (default 1.5x the accepted p95)"
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
    decide.add_argument("--config", type=Path, help="sign-off owners for the combined decision")
    decide.add_argument("--policy", type=Path, help="decision policy for the combined decision")
    decide.add_argument("--json", action="store_true", help="print the re-derived decision")


# -- what the flags set in the config: dotted keys; None leaves the config file's value --
def target_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "target.url": args.target,
        "target.metrics_url": args.metrics_url,
        "target.api_key_env": args.api_key_env,
        "target.model": args.model,
        "target.engine_url": args.engine_url,
        "profile": args.profile,
        "policy": None if args.policy is None else str(args.policy),
        "sign_key": None if args.sign_key is None else str(args.sign_key),
    }


def capacity_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "capacity.concurrency": args.concurrency,
        "capacity.max_context": args.max_context,
        "capacity.duration_s": args.duration,
        "capacity.step_duration_s": args.step_duration,
    }


def agent_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "agent.repeat": args.repeat,
        "agent.schemas_file": None if args.schemas is None else str(args.schemas),
        "agent.cases": args.case,
        "agent.temperature": args.temperature,
        "agent.concurrency": getattr(args, "concurrency", None)
        if args.command == "agent"
        else None,
    }
